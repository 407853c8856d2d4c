// Behaviour every page shares, without inline handlers (the Content-Security-Policy forbids them).

// The language menu applies at once (a Go button stands in without JavaScript).
for (const select of document.querySelectorAll("select[data-submit-on-change]")) {
  select.addEventListener("change", () => select.form.submit());
}

// On a phone the main navigation folds behind a Menu button (shown by portal.css only on
// narrow screens; without JavaScript the navigation simply stays open).
const toggle = document.querySelector(".menu-toggle");
const nav = toggle && document.getElementById(toggle.getAttribute("aria-controls"));
if (toggle && nav) {
  toggle.hidden = false;
  document.documentElement.classList.add("menu-ready");
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    nav.classList.toggle("open", open);
  });
}
