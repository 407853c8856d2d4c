// The collection page: uploads with a progress bar per file (XMLHttpRequest for the upload %,
// then the collection's websocket for parsing and the outcome), live document statuses, and
// the index version buttons. Without JavaScript the page's forms still post as usual.

const root = document.getElementById("collection-page");
const strings = JSON.parse(document.getElementById("collection-strings").textContent);
const collectionId = root.dataset.collection;
const csrf = root.dataset.csrf;

function say(key, values = {}) {
  return strings[key].replace(/%\((\w+)\)s/g, (_m, name) => String(values[name] ?? "")).replace(/%%/g, "%");
}

for (const element of document.querySelectorAll(".js-only")) element.hidden = false;

// --- Live events -----------------------------------------------------------------------

const rows = new Map(); // document id -> upload row waiting for its outcome
const latest = new Map(); // document id -> the last event seen, for rows whose upload answer is late
let socket = null;
let socketOpen = false;
let pollTimer = null;

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws/collections/${collectionId}/`);
  socket.addEventListener("open", () => { socketOpen = true; });
  socket.addEventListener("message", (message) => handle(JSON.parse(message.data)));
  socket.addEventListener("close", (event) => {
    socketOpen = false;
    if (event.code === 4401 || event.code === 4404) return;
    startPolling();
    setTimeout(connect, 5000);
  });
}

function handle(event) {
  if (event.document !== undefined) latest.set(event.document, event);
  const row = rows.get(event.document);
  if (event.type === "document.progress") {
    if (row) row.parsing(event.pages_done, event.pages_total, event.pages_per_second, event.seconds_left);
    updateStatusCell(event.document, "processing");
  } else if (event.type === "document.ready") {
    if (row) row.done(event.pages);
    refreshSoon();
  } else if (event.type === "document.failed") {
    if (row) row.failed(say("failed", { error: event.error }));
    refreshSoon();
  } else if (event.type === "document.deleted" || event.type === "index.flipped" || event.type === "index.held") {
    refreshSoon();
  }
}

function updateStatusCell(documentId, status) {
  const cell = document.querySelector(`#document-${documentId} .status .tag`);
  if (cell && !cell.classList.contains(`status-${status}`)) {
    cell.className = `tag status-${status}`;
  }
}

// Without the socket, ask the API about the documents still in flight every few seconds.
function startPolling() {
  if (pollTimer) return;
  pollTimer = setInterval(async () => {
    if (socketOpen || rows.size === 0) {
      clearInterval(pollTimer);
      pollTimer = null;
      return;
    }
    for (const [id, row] of rows) {
      const response = await fetch(`/api/documents/${id}/`, { headers: { Accept: "application/json" } });
      if (!response.ok) continue;
      const data = await response.json();
      if (data.status === "ready") { row.done(data.page_count); refreshSoon(); }
      else if (data.status === "failed") { row.failed(say("failed", { error: data.error })); refreshSoon(); }
    }
  }, 3000);
}

// Re-read the page and swap in the documents table and the versions table: the server
// renders them, so they look the same as after a reload.
let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, 400);
}

async function refresh() {
  const response = await fetch(location.pathname, { headers: { Accept: "text/html" } });
  if (!response.ok) return;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
  for (const id of ["documents-body", "versions-body"]) {
    const old = document.getElementById(id);
    const replacement = fresh.getElementById(id);
    if (!old || !replacement || old.contains(document.activeElement)) continue;
    old.replaceWith(document.adoptNode(replacement));
  }
  for (const element of document.querySelectorAll(".js-only")) element.hidden = false;
  updateRollback(document);
}

// --- Uploads -----------------------------------------------------------------------------

const form = document.getElementById("upload-form");
const list = document.getElementById("upload-list");

class UploadRow {
  constructor(file) {
    this.file = file;
    this.element = document.createElement("li");
    this.element.className = "upload-row";
    this.element.dataset.name = file.name;
    this.name = document.createElement("span");
    this.name.className = "name";
    this.name.textContent = file.name;
    this.bar = document.createElement("progress");
    this.bar.className = "progress";
    this.bar.max = 100;
    this.bar.value = 0;
    this.bar.setAttribute("aria-label", file.name);
    this.state = document.createElement("span");
    this.state.className = "state";
    this.element.append(this.name, this.bar, this.state);
    list.append(this.element);
    list.hidden = false;
    this.set("uploading", say("uploading", { percent: 0 }));
  }

  set(state, text) {
    this.element.dataset.state = state;
    this.state.textContent = text;
  }

  uploaded(percent) {
    this.bar.value = percent;
    this.set("uploading", say("uploading", { percent }));
  }

  waiting(documentId, knownPages) {
    this.documentId = documentId;
    this.total = knownPages || 0;
    this.bar.removeAttribute("value"); // indeterminate until pages arrive
    this.set("waiting", say("waiting"));
    const link = document.createElement("a");
    link.href = `/documents/${documentId}/`;
    link.textContent = this.file.name;
    this.name.replaceChildren(link);
  }

  parsing(done, total, rate, left) {
    if (total) this.total = total;
    if (this.total && done <= this.total) {
      this.bar.max = this.total;
      this.bar.value = done;
      let text = say("parsing", { done, total: this.total });
      if (rate && left !== null && left !== undefined && done < this.total) {
        const time = left >= 90 ? say("minutes", { count: Math.round(left / 60) }) : say("seconds", { count: left });
        text += ` · ${say("pace", { rate: rate.toFixed(1), left: time })}`;
      }
      this.set("parsing", text);
    } else {
      this.bar.removeAttribute("value");
      this.set("parsing", say("parsing_count", { done }));
    }
  }

  done(pages) {
    rows.delete(this.documentId);
    this.bar.max = 100;
    this.bar.value = 100;
    this.set("done", say(Number(pages) === 1 ? "done_one" : "done", { pages }));
  }

  unchanged() {
    this.bar.value = 100;
    this.set("done", say("unchanged"));
  }

  failed(message) { // a readable sentence, shown as it is
    rows.delete(this.documentId);
    this.bar.max = 100;
    this.bar.value = 0;
    this.element.classList.add("error");
    this.set("error", message);
    this.state.setAttribute("role", "alert");
  }
}

function upload(file) {
  const row = new UploadRow(file);
  const limit = Number(form.dataset.maxBytes);
  if (limit && file.size > limit) {
    row.failed(say("too_large", { limit: Math.round(limit / 1048576) }));
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const request = new XMLHttpRequest();
    request.open("POST", form.dataset.api);
    request.setRequestHeader("X-CSRFToken", csrf);
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) row.uploaded(Math.min(99, Math.round((100 * event.loaded) / event.total)));
    });
    request.addEventListener("load", () => { answered(row, request); resolve(); });
    request.addEventListener("error", () => { row.failed(say("network")); resolve(); });
    request.addEventListener("abort", () => { row.failed(say("network")); resolve(); });
    const body = new FormData();
    body.append("files", file, file.name);
    request.send(body);
  });
}

function answered(row, request) {
  let data = null;
  try { data = JSON.parse(request.responseText); } catch { data = null; }
  const result = Array.isArray(data) ? data[0] : null;
  if (request.status === 403) return row.failed(say("forbidden"));
  if (request.status === 413) return row.failed(say("too_large", { limit: Math.round(Number(form.dataset.maxBytes) / 1048576) }));
  if (!result) return row.failed(errorText(data) || say("upload_failed", { status: request.status }));
  if (result.error) return row.failed(result.error);
  row.uploaded(100);
  if (result.unchanged) return row.unchanged();
  const known = document.querySelector(`#document-${result.document}`);
  row.waiting(result.document, known ? Number(known.dataset.pages) : 0);
  rows.set(result.document, row);
  const seen = latest.get(result.document);
  if (seen && (seen.run === undefined || seen.run === result.run)) handle(seen);
  if (!socketOpen) startPolling();
}

function errorText(data) {
  if (!data || typeof data !== "object") return "";
  const detail = data.detail;
  return Array.isArray(detail) ? detail.join(" ") : typeof detail === "string" ? detail : "";
}

async function uploadAll(files) {
  // One at a time: each file's bar moves in turn and the server is not flooded.
  for (const file of files) await upload(file);
}

if (form) {
  const input = document.getElementById("files");
  const zone = document.getElementById("dropzone");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.files.length) { input.reportValidity(); return; }
    const files = [...input.files];
    input.value = "";
    uploadAll(files);
  });
  for (const name of ["dragenter", "dragover"]) {
    zone.addEventListener(name, (event) => { event.preventDefault(); zone.classList.add("dragging"); });
  }
  for (const name of ["dragleave", "drop"]) {
    zone.addEventListener(name, (event) => {
      if (name === "dragleave" && zone.contains(event.relatedTarget)) return;
      zone.classList.remove("dragging");
    });
  }
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    const files = [...(event.dataTransfer?.files || [])];
    if (files.length) uploadAll(files);
  });
}

// --- Document actions --------------------------------------------------------------------

document.addEventListener("submit", (event) => {
  const target = event.target;
  if (target instanceof HTMLFormElement && target.dataset.confirm && !window.confirm(target.dataset.confirm)) {
    event.preventDefault();
  }
});

// --- Index versions (the REST endpoints, for owners and team admins) -----------------------

const versions = document.getElementById("versions");
const versionMessage = document.getElementById("version-message");

async function versionAction(url, question, success) {
  if (question && !window.confirm(question)) return;
  versionMessage.classList.remove("error");
  const response = await fetch(url, {
    method: "POST",
    headers: { "X-CSRFToken": csrf, Accept: "application/json" },
    credentials: "same-origin",
  });
  let data = {};
  try { data = await response.json(); } catch { data = {}; }
  if (!response.ok) {
    versionMessage.classList.add("error");
    versionMessage.textContent = say("action_failed", { detail: errorText(data) || response.status });
    return;
  }
  versionMessage.textContent = say(success, { number: data.number });
  refresh();
}

function updateRollback(page) {
  const button = document.getElementById("rollback");
  if (button) button.disabled = !page.querySelector("#version-table tr[data-status=retired]");
}

if (versions) {
  versions.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    if (button.id === "reindex") {
      versionAction(versions.dataset.reindex, strings.confirm_reindex, "version_started");
    } else if (button.id === "rollback") {
      versionAction(versions.dataset.rollback, strings.confirm_rollback, "version_active");
    } else if (button.classList.contains("version-activate")) {
      const number = button.closest("tr").dataset.version;
      versionAction(button.dataset.url, say("confirm_activate", { number }), "version_active");
    }
  });
  updateRollback(document);
  // A build's progress is counted on the server: look again while one is running.
  setInterval(() => {
    if (document.querySelector("#version-table tr[data-status=building]")) refresh();
  }, 5000);
}

connect();
