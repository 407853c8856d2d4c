// The page view: hovering or focusing a chunk in the list lights up its box on the page
// image, and the other way round; a cited chunk (?chunk=) is scrolled into view.

const boxes = new Map();
for (const box of document.querySelectorAll(".chunk-box")) boxes.set(box.dataset.chunk, box);
const items = new Map();
for (const item of document.querySelectorAll("#chunks .chunk")) items.set(item.dataset.chunk, item);

function light(id, on) {
  boxes.get(id)?.classList.toggle("is-hot", on);
  items.get(id)?.classList.toggle("is-hot", on);
}

for (const [id, item] of items) {
  for (const name of ["mouseenter", "focus"]) item.addEventListener(name, () => light(id, true));
  for (const name of ["mouseleave", "blur"]) item.addEventListener(name, () => light(id, false));
}
for (const [id, box] of boxes) {
  box.addEventListener("mouseenter", () => light(id, true));
  box.addEventListener("mouseleave", () => light(id, false));
  box.addEventListener("click", (event) => {
    event.preventDefault();
    const item = items.get(id);
    if (!item) return;
    item.scrollIntoView({ block: "nearest", behavior: "smooth" });
    item.focus({ preventScroll: true });
  });
}

const selected = document.querySelector("#chunks .chunk.is-selected");
if (selected) {
  document.querySelector(".chunk-box.is-selected")?.scrollIntoView({ block: "center" });
  selected.scrollIntoView({ block: "nearest" });
}
