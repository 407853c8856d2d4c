// A collection's Evaluations page: the progress of its evaluation runs, live over
// /ws/collections/<id>/ (`evaluation.progress` events); the page is read again when a run
// ends or the gate decides, so that its figures, plot and any held version appear.

const page = document.getElementById("quality-page");
const collectionId = page.dataset.collection;
const ENDED = new Set(["succeeded", "failed"]);
// A form being sent (evaluate, flip anyway) brings its own page with its message: a reload
// for an event its action caused would race it and lose the message.
let leaving = false;
document.addEventListener("submit", () => { leaving = true; });

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/collections/${collectionId}/`);
  socket.addEventListener("message", (message) => handle(JSON.parse(message.data)));
  socket.addEventListener("close", (event) => {
    if (event.code !== 4401 && event.code !== 4404) setTimeout(connect, 5000);
  });
}

function handle(event) {
  if (leaving) return;
  if (event.type === "index.flipped" || event.type === "index.held") {
    location.reload();
    return;
  }
  if (event.type !== "evaluation.progress") return;
  const row = document.querySelector(`#evaluation-runs tr[data-run="${event.run}"]`);
  if (!row) {
    location.reload(); // a run queued elsewhere (the gate, the API)
    return;
  }
  const bar = row.querySelector("progress");
  if (bar) {
    bar.max = event.total;
    bar.value = event.done;
  }
  if (ENDED.has(event.status) && row.dataset.status !== event.status) location.reload();
}

connect();
