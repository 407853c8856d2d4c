// A collection's Evaluations page: the progress of its evaluation runs, live over
// /ws/collections/<id>/ (`evaluation.progress` events); the page is read again when a run
// ends or the gate decides, so that its figures, plot and any held version appear.

import { follow, isLeaving } from "./collection_events.js";

const page = document.getElementById("quality-page");
const collectionId = page.dataset.collection;
const ENDED = new Set(["succeeded", "failed"]);

function handle(event) {
  if (isLeaving()) return;
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

follow(collectionId, handle);
