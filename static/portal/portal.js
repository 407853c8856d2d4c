// Behaviour every page shares, without inline handlers (the Content-Security-Policy forbids them).

// The language menu applies at once (a Go button stands in without JavaScript).
for (const select of document.querySelectorAll("select[data-submit-on-change]")) {
  select.addEventListener("change", () => select.form.submit());
}
