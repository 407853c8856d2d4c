// A collection's sources pages: the running sync's row follows its `source.progress` events
// over /ws/collections/<id>/ ({type, source, run, status, progress, total, counts}): status,
// progress bar and counts in place. A run this page does not show yet (queued by the schedule
// or the API) or one that ends reloads the page, which then shows its error and skipped files
// (the socket carries no error text: every viewer of the collection hears it). Without
// JavaScript the page is the same, as of when it was loaded.

import { follow, isLeaving } from "./collection_events.js";

const page = document.getElementById("source-page") || document.getElementById("sources-page");
const strings = JSON.parse(document.getElementById("sources-strings").textContent);
const collectionId = page.dataset.collection;
const sourceId = page.dataset.source; // undefined on the list of sources
const ENDED = new Set(["succeeded", "failed"]);

// Events sent before the socket joined the collection's group are lost: a run that ended
// between the page's rendering and then (a quick run, a slow connection, a reconnect) would
// show as running for good. Once subscribed, read the page again; reload when its runs moved.
async function catchUp() {
  const response = await fetch(location.pathname, { headers: { Accept: "text/html" } });
  if (!response.ok || isLeaving()) return;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
  if (!isLeaving() && runsOf(fresh) !== runsOf(document)) location.reload();
}

function runsOf(doc) {
  return [...doc.querySelectorAll("tr[data-run]")].map((row) => `${row.dataset.run}:${row.dataset.status}`).join(",");
}

function rowFor(event) {
  if (sourceId !== undefined) {
    if (String(event.source) !== sourceId) return undefined;
    return document.querySelector(`#sync-runs tr[data-run="${event.run}"]`);
  }
  const row = document.querySelector(`#sources tr[data-source="${event.source}"]`);
  if (row === null) return undefined; // a source added elsewhere: not this page's business
  return row.dataset.run === String(event.run) ? row : null;
}

function handle(event) {
  if (event.type === "subscribed") catchUp();
  if (isLeaving() || event.type !== "source.progress") return;
  const row = rowFor(event);
  if (row === undefined) return;
  if (row === null) {
    location.reload(); // a run this page does not show yet
    return;
  }
  const ended = ENDED.has(event.status) && row.dataset.status !== event.status;
  update(row, event);
  if (ended) location.reload();
}

function update(row, event) {
  row.dataset.status = event.status;
  const tag = row.querySelector(".run-status .tag");
  if (tag) {
    tag.className = `tag status-${event.status}`;
    tag.textContent = strings.status[event.status] || event.status;
  }
  const bar = row.querySelector("progress");
  if (bar && event.total) {
    bar.max = event.total;
    bar.value = event.progress;
  }
  for (const cell of row.querySelectorAll("[data-count]")) {
    const value = (event.counts || {})[cell.dataset.count];
    if (value !== undefined) cell.textContent = String(value);
  }
}

follow(collectionId, handle);
