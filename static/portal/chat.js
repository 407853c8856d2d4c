// The chat page: asks over /ws/chat/ and shows the answer's events as they arrive (README,
// "Answering"). Every string a person reads comes from the template (#chat-strings), translated.

import { highlight, renderMarkdown } from "./markdown.js";

const MAX_RETRY_MS = 30000;

const root = document.getElementById("chat");
const strings = JSON.parse(document.getElementById("chat-strings").textContent);
const stored = JSON.parse(document.getElementById("chat-citations").textContent);
// Each stored answer's evidence, decisions, mode and closest passages, by message id.
const storedFound = JSON.parse(document.getElementById("chat-found").textContent);
const composer = document.getElementById("composer");
const question = document.getElementById("question");
const sendButton = document.getElementById("send");
const cancelButton = document.getElementById("cancel");
const connection = document.getElementById("connection");
const list = document.getElementById("messages");

const state = {
  socket: null,
  open: false,
  retry: 0,
  loggedOut: false,
  conversation: root.dataset.conversation ? Number(root.dataset.conversation) : null,
  turn: null, // the answer being written: its <article>
};
// Each answer's <article> → what its events said: {text, citations, sources, asked}.
const answers = new WeakMap();
// Each evidence card's source button → the citation it opens.
const evidenceCitations = new WeakMap();

function format(template, values) {
  return template.replace(/%\((\w+)\)[sd]/g, (_, key) => String(values[key] ?? ""));
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function show(node, visible = true) {
  node.hidden = !visible;
}

// -- the answer's text, with [n] as buttons -------------------------------------------------

function citationButton(n) {
  const button = el("button", "citation-link", `[${n}]`);
  button.type = "button";
  button.dataset.n = String(n);
  button.setAttribute("aria-label", format(strings.source, { n }));
  return button;
}

// The answer as Markdown (static/portal/markdown.js), live while it streams and on reload.
function renderText(container, text) {
  renderMarkdown(container, text, citationButton);
}

// -- turns ----------------------------------------------------------------------------------

function fromTemplate(id) {
  return document.getElementById(id).content.firstElementChild.cloneNode(true);
}

function nearBottom() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
}

function keepInView(node) {
  if (nearBottom()) node.scrollIntoView({ block: "end" });
}

function startTurn(text) {
  document.getElementById("chat-empty")?.remove();
  const asked = fromTemplate("question-template");
  asked.querySelector(".text").textContent = text;
  const turn = fromTemplate("answer-template");
  // `asked`: when the question was sent, for the seconds each stage took to reach.
  answers.set(turn, { text: "", citations: null, sources: [], asked: performance.now() });
  turn.querySelector(".answer").setAttribute("aria-busy", "true");
  turn.querySelector(".status").textContent = strings.thinking;
  list.append(asked, turn);
  turn.scrollIntoView({ block: "end" });
  state.turn = turn;
  updateButtons();
  return turn;
}

function finishTurn(turn, { status = "", error = "" } = {}) {
  const data = answers.get(turn);
  turn.querySelector(".answer").setAttribute("aria-busy", "false");
  turn.querySelector(".status").textContent = status;
  if (error) {
    const box = turn.querySelector(".error");
    box.textContent = error;
    show(box);
    turn.classList.add("failed");
  }
  show(turn.querySelector(".actions"), Boolean(data.text));
  if (state.turn === turn) state.turn = null;
  updateButtons();
}

function updateButtons() {
  sendButton.disabled = !state.open || state.turn !== null;
  cancelButton.disabled = !state.open || state.turn === null;
}

// -- events ---------------------------------------------------------------------------------

const handlers = {
  started(turn, event) {
    const known = state.conversation;
    state.conversation = event.conversation;
    const url = `${root.dataset.chatUrl}${event.conversation}/`;
    if (known !== event.conversation) {
      history.replaceState(null, "", url);
      addConversation(event.conversation, url, answers.get(turn).question);
    } else {
      // Newest first, as the page lists them after a reload.
      const current = document.querySelector("#conversation-list li.current");
      if (current) current.parentElement.prepend(current);
    }
    turn.dataset.collections = (event.collections ?? []).map((collection) => collection.id).join(",");
    const searched = turn.querySelector(".searched");
    const names = (event.collections ?? []).map((collection) => collection.name);
    searched.textContent = names.length ? format(strings.searched, { collections: names.join(", ") }) : strings.searched_none;
    show(searched);
    show(turn.querySelector(".how"));
  },
  queued(turn) {
    turn.querySelector(".status").textContent = strings.queued;
  },
  strategy(turn, event) {
    const how = turn.querySelector(".how");
    show(how);
    const line = turn.querySelector(".strategy");
    line.textContent = format(strings.strategy, { strategy: strings.strategies[event.strategy] ?? event.strategy });
    show(line);
    const reason = turn.querySelector(".reason");
    reason.textContent = [event.reason, event.by === "rules" ? strings.by_rules : ""].filter(Boolean).join(" ");
    show(reason, Boolean(reason.textContent));
  },
  rewrite(turn, event) {
    const line = turn.querySelector(".rewrite");
    line.textContent = format(strings.rewrite, { query: event.query });
    show(line);
  },
  plan(turn, event) {
    const plan = turn.querySelector(".plan");
    plan.querySelector("ol").replaceChildren(
      ...event.steps.map((step) => {
        const item = el("li");
        item.append(el("span", "step-query", step), el("ul", "hits"));
        return item;
      }),
    );
    show(plan);
  },
  "step.start"(turn, event) {
    const item = turn.querySelectorAll(".plan > ol > li")[event.step - 1];
    if (item) item.querySelector(".hits").replaceChildren(el("li", "meta", strings.searching));
  },
  "step.result"(turn, event) {
    const item = turn.querySelectorAll(".plan > ol > li")[event.step - 1];
    if (!item) return;
    const hits = event.hits.map((hit) => hitItem(hit));
    item.querySelector(".hits").replaceChildren(...(hits.length ? hits : [el("li", "meta", strings.no_hits)]));
  },
  "memory.used"(turn, event) {
    const box = turn.querySelector(".memory-used");
    box.querySelector("ul").replaceChildren(...event.memories.map((memory) => el("li", "", memory.text)));
    show(box, event.memories.length > 0);
  },
  retrieval(turn, event) {
    answers.get(turn).sources = event.sources;
    const box = turn.querySelector(".sources");
    box.querySelector("ol").replaceChildren(...event.sources.map((hit) => hitItem(hit)));
    show(box, event.sources.length > 0);
  },
  stage(turn, event) {
    // What the answer does now, in the question's language: the status line, and one more
    // stage passed in "How it was found".
    turn.querySelector(".status").textContent = event.text || strings.thinking;
    const seconds = (performance.now() - answers.get(turn).asked) / 1000;
    const item = el("li", "", `${event.text} `);
    item.dataset.stage = event.stage;
    item.append(el("span", "elapsed", format(strings.seconds, { seconds: seconds.toFixed(1) })));
    const stages = turn.querySelector(".found .stages");
    stages.append(item);
    show(stages);
    show(turn.querySelector(".found"));
  },
  evidence(turn, event) {
    // The span that answers, shown at once: the answer, when it comes, rests on it.
    addEvidence(turn, event);
    keepInView(turn);
  },
  "answer.delta"(turn, event) {
    const data = answers.get(turn);
    data.text += event.text;
    turn.querySelector(".status").textContent = "";
    renderText(turn.querySelector(".answer"), data.text);
    compactEvidence(turn);
    keepInView(turn);
  },
  "answer.replace"(turn, event) {
    // The answer checked against its passages replaces what was streamed.
    const data = answers.get(turn);
    data.text = event.text;
    renderText(turn.querySelector(".answer"), data.text);
    compactEvidence(turn);
    keepInView(turn);
  },
  closest(turn, event) {
    // The portal declined: where the nearest passages are, each a link to its page.
    const box = turn.querySelector(".closest");
    box.querySelector("ol").replaceChildren(...event.passages.map(closestItem));
    show(box, event.passages.length > 0);
  },
  citations(turn, event) {
    answers.get(turn).citations = event.citations;
    renderCitations(turn, event.citations);
    markUncited(turn, event.citations);
  },
  attachments(turn, event) {
    turn.querySelector(".attachments").replaceChildren(...event.attachments.map(attachmentFigure));
    keepInView(turn);
  },
  done(turn, event) {
    // A declined answer has no evidence: the closest passages (`closest`) say where to look.
    if (event.abstain) removeEvidence(turn);
    renderFound(turn, event.mode, event.decisions);
    finishTurn(turn, { status: event.cancelled ? strings.cancelled : "" });
    // A finished answer is stored: it can be rated now (one cancelled halfway cannot).
    turn.dataset.message = String(event.message);
    const feedback = turn.querySelector(".feedback");
    if (feedback) show(feedback, !event.cancelled);
  },
  error(turn, event) {
    finishTurn(turn, { error: event.message });
  },
};

function hitItem(hit) {
  const label = `${hit.n ? `[${hit.n}] ` : ""}${hit.file} · ${hit.place}`;
  const item = el("li", "", label);
  if (hit.snippet) item.title = hit.snippet;
  return item;
}

function closestItem(passage) {
  const item = el("li");
  const link = el("a", "", `${passage.file} · ${passage.place}`);
  link.href = passage.url ?? `/documents/${passage.document_id}/pages/${passage.page}/?chunk=${passage.chunk_id}`;
  if (passage.snippet) link.title = passage.snippet;
  item.append(link);
  return item;
}

// -- the evidence, and how it was found -------------------------------------------------------

// One card per evidence event (one per step of a multi-step answer, in the steps' order): the
// quote highlighted, how sure the reader is, and the passage it is in, which opens as a citation.
function addEvidence(turn, item) {
  const container = turn.querySelector(".evidence");
  const step = item.step ?? null;
  const card = el("div", "evidence-card");
  if (step !== null) {
    card.dataset.step = String(step);
    container.querySelector(`.evidence-card[data-step="${step}"]`)?.remove();
  }
  const head = el("p", "evidence-head");
  const label = step === null ? strings.evidence : format(strings.evidence_step, { step });
  head.append(el("span", "evidence-label", label));
  const confidence = Number(item.confidence);
  if (item.confidence !== null && item.confidence !== undefined && Number.isFinite(confidence)) {
    head.append(el("span", "confidence", format(strings.confidence, { confidence: confidence.toFixed(2) })));
  }
  const quote = el("blockquote", "evidence-quote");
  quote.append(el("mark", "", item.quote ?? ""));
  card.append(head, quote);
  const cited = item.citation;
  if (cited) {
    const where = el("p", "evidence-where");
    const button = el("button", "link evidence-source", [cited.file, cited.place].filter(Boolean).join(" · "));
    button.type = "button";
    button.setAttribute("aria-label", format(strings.evidence_open, { file: cited.file, place: cited.place }));
    // The dialog highlights the quote inside the passage, as for the answer's citations.
    evidenceCitations.set(button, { ...cited, quote: cited.quote || item.quote || "" });
    where.append(button);
    card.append(where);
  }
  const later = step === null ? null : [...container.children].find((other) => Number(other.dataset.step) > step);
  container.insertBefore(card, later ?? null);
  show(container);
}

// Once the answer's text is there, the evidence it rests on takes less room.
function compactEvidence(turn) {
  turn.querySelector(".evidence").classList.add("compact");
}

function removeEvidence(turn) {
  const container = turn.querySelector(".evidence");
  container.replaceChildren();
  show(container, false);
}

// "How it was found": the answer's mode, and each decision as stage — outcome — reason (figures).
function renderFound(turn, mode, decisions) {
  const modeLine = turn.querySelector(".found-mode");
  modeLine.textContent = mode ? format(strings.mode, { mode: strings.modes[mode] ?? mode }) : "";
  show(modeLine, Boolean(mode));
  const list = turn.querySelector(".found .decisions");
  list.replaceChildren(...(decisions ?? []).map(decisionItem));
  show(list, list.children.length > 0);
  const found = turn.querySelector(".found");
  show(found, !modeLine.hidden || !list.hidden || !turn.querySelector(".found .stages").hidden);
}

function decisionItem(decision) {
  const parts = [
    strings.decision_stages[decision.stage] ?? decision.stage,
    strings.decision_outcomes[decision.outcome] ?? decision.outcome,
    strings.decision_reasons[decision.reason] ?? decision.reason,
  ].filter(Boolean);
  const item = el("li", decision.final ? "final" : "", parts.join(" — "));
  item.dataset.stage = decision.stage ?? "";
  const figures = compactFigures(decision.figures);
  if (figures) item.append(" ", el("span", "figures", `(${figures})`));
  return item;
}

// {score: 0.8234, passages: 4} → "score=0.82, passages=4"
function compactFigures(figures) {
  return Object.entries(figures ?? {})
    .filter(([, value]) => value !== null && value !== undefined && value !== "")
    .map(([name, value]) => {
      if (typeof value === "number" && !Number.isInteger(value)) return `${name}=${value.toFixed(2)}`;
      return `${name}=${typeof value === "object" ? JSON.stringify(value) : value}`;
    })
    .join(", ");
}

function renderCitations(turn, citations) {
  const box = turn.querySelector(".citations");
  box.querySelector("ol").replaceChildren(
    ...citations.map((cited) => {
      const item = el("li");
      const button = citationButton(cited.n);
      button.classList.add("source");
      button.removeAttribute("aria-label");
      item.append(button, ` ${cited.file} · ${cited.place}`);
      if (cited.inferred) item.append(" ", el("span", "meta", `(${strings.inferred})`));
      return item;
    }),
  );
  show(box, citations.length > 0);
}

// A mark the answer wrote for a passage it was not given: shown, but plainly not a source.
function markUncited(turn, citations) {
  for (const link of turn.querySelectorAll(".answer .citation-link")) {
    link.classList.toggle("uncited", !citations.some((item) => item.n === Number(link.dataset.n)));
  }
}

function attachmentFigure(attached) {
  const figure = el("figure", "attachment");
  if (attached.kind === "video") {
    const video = el("video");
    video.controls = true;
    video.preload = "metadata";
    video.src = attached.url;
    figure.append(video);
  } else {
    const link = el("a");
    link.href = attached.url;
    const image = el("img");
    image.src = attached.url;
    image.alt = attached.file;
    image.loading = "lazy";
    link.append(image);
    figure.append(link);
  }
  figure.append(el("figcaption", "", attached.file));
  return figure;
}

function addConversation(id, url, title) {
  document.getElementById("conversations-empty")?.remove();
  const item = fromTemplate("conversation-template");
  const link = item.querySelector("a");
  link.href = url;
  link.textContent = title.slice(0, 80);
  link.setAttribute("aria-current", "page");
  item.classList.add("current");
  item.querySelector("form").action = `${url}delete/`;
  const listing = document.getElementById("conversation-list");
  listing.querySelectorAll("li.current").forEach((other) => {
    other.classList.remove("current");
    other.querySelector("a").removeAttribute("aria-current");
  });
  listing.prepend(item);
  document.getElementById("chat-title").textContent = link.textContent;
  document.title = `${link.textContent} · ${document.title.split(" · ").pop()}`;
}

// -- the socket -----------------------------------------------------------------------------

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}${root.dataset.socketPath}`);
  state.socket = socket;
  socket.addEventListener("open", () => {
    state.open = true;
    state.retry = 0;
    connection.textContent = "";
    updateButtons();
  });
  socket.addEventListener("message", (message) => {
    const event = JSON.parse(message.data);
    const handler = handlers[event.type];
    if (state.turn && handler) handler(state.turn, event);
    else if (event.type === "error") connection.textContent = event.message;
  });
  socket.addEventListener("close", (closed) => {
    state.open = false;
    // The server stops an answer whose socket closed; what it wrote is stored.
    if (state.turn) finishTurn(state.turn, { error: strings.dropped });
    updateButtons();
    if (closed.code === 4401) {
      state.loggedOut = true;
      connection.textContent = strings.logged_out;
      return;
    }
    connection.textContent = strings.offline;
    const delay = Math.min(MAX_RETRY_MS, 1000 * 2 ** state.retry) * (0.8 + Math.random() * 0.4);
    state.retry += 1;
    setTimeout(connect, delay);
  });
}

function ask() {
  const text = question.value.trim();
  if (!text || !state.open || state.turn) return;
  const checked = [...composer.querySelectorAll("input[name=collections]:checked")].map((box) => Number(box.value));
  const turn = startTurn(text);
  answers.get(turn).question = text;
  state.socket.send(
    JSON.stringify({
      type: "ask",
      question: text,
      collections: checked.length ? checked : null,
      conversation: state.conversation,
    }),
  );
  question.value = "";
}

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  ask();
});

question.addEventListener("keydown", (event) => {
  // Enter while an input method is composing (Chinese, Japanese) picks a candidate: not a send.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
    event.preventDefault();
    ask();
  }
});

cancelButton.addEventListener("click", () => {
  if (state.turn && state.open) {
    state.socket.send(JSON.stringify({ type: "cancel" }));
    cancelButton.disabled = true;
  }
});

// -- citations in a dialog ------------------------------------------------------------------

const dialog = document.getElementById("citation-dialog");
const pageView = dialog.querySelector(".page-view");
const pageImage = pageView.querySelector("img");
const box = pageView.querySelector(".bbox");
// The quoted span's own box, drawn over the chunk's.
const quoteBox = pageView.appendChild(el("div", "quote-box"));
quoteBox.hidden = true;
const video = dialog.querySelector("video");
const noPicture = dialog.querySelector(".no-picture");
let opener = null;

function citationsOf(turn) {
  const data = answers.get(turn);
  if (data) return { citations: data.citations ?? [], sources: data.sources };
  return { citations: stored[turn.dataset.message] ?? [], sources: [] };
}

function openEvidence(button) {
  const cited = evidenceCitations.get(button);
  if (!cited) return;
  opener = button;
  showCitation(cited);
  dialog.showModal();
}

function openSource(button) {
  const turn = button.closest(".answer-turn");
  const n = Number(button.dataset.n);
  const { citations, sources } = citationsOf(turn);
  const cited = citations.find((item) => item.n === n);
  const preview = sources.find((item) => item.n === n);
  opener = button;
  if (cited) showCitation(cited);
  else if (preview) showPreview(preview);
  else showMissing(n);
  dialog.showModal();
}

// The passage in the dialog, the span the answer rests on highlighted and scrolled to. One
// title line ("[1] file · page 3"); the path below it only where it says more than the name.
function resetDialog(title, place, path, snippet, quote = "") {
  dialog.querySelector("#citation-title").textContent = place ? `${title} · ${place}` : title;
  show(dialog.querySelector(".citation-origin"), false);
  dialog.querySelector(".citation-path").textContent = path;
  show(dialog.querySelector(".citation-where"), Boolean(path) && !title.endsWith(` ${path}`) && title !== path);
  zoomTo = null;
  zoom(false);
  show(zoomLine, false);
  const passage = dialog.querySelector(".citation-snippet");
  const mark = highlight(passage, snippet, quote);
  if (mark) requestAnimationFrame(() => mark.scrollIntoView({ block: "nearest" }));
  show(pageView, false);
  show(box, false);
  show(quoteBox, false);
  show(noPicture, false);
  show(video, false);
  video.removeAttribute("src");
}

// Where a source brought the file from: its path there, linked where the source has a page.
function showOrigin(origin) {
  const line = dialog.querySelector(".citation-origin");
  show(line, Boolean(origin));
  if (!origin) return;
  line.querySelector(".citation-origin-name").textContent = origin.name;
  const link = line.querySelector(".citation-origin-link");
  const plain = line.querySelector(".citation-origin-path");
  const safe = /^https?:\/\//i.test(origin.url ?? "");
  link.textContent = safe ? origin.path : "";
  link.href = safe ? origin.url : "";
  show(link, safe);
  plain.textContent = safe ? "" : origin.path;
}

function showCitation(cited) {
  // Citations stored before they carried the passage have only its first 240 characters.
  const title = cited.n ? `[${cited.n}] ${cited.file}` : cited.file;
  resetDialog(title, cited.place, cited.path, cited.text ?? cited.snippet ?? "", cited.quote);
  showOrigin(cited.origin);
  const open = dialog.querySelector(".citation-open");
  open.href = `/documents/${cited.document_id}/pages/${cited.page}/?chunk=${cited.chunk_id}`;
  show(open.parentElement, Boolean(cited.document_id && cited.page));
  const location = cited.location ?? {};
  const start = location.t_start;
  if (cited.page_kind === "video_segment" || (start !== null && start !== undefined)) {
    // The video beside a subtitle file when there is one (citations stored before `video_url` have none).
    video.src = cited.video_url ?? `/api/documents/${cited.document_id}/original/#t=${Number(start ?? 0)}`;
    show(video);
    return;
  }
  pageImage.alt = `${cited.file}, ${cited.place}`;
  pageImage.onerror = () => {
    show(pageView, false);
    noPicture.textContent = strings.no_picture;
    show(noPicture);
  };
  pageImage.onload = () => {
    show(pageView); // only now: never the previous citation's page under this one's title
    const chunkPlaced = placeBox(box, location.bbox, cited.page_width, cited.page_height);
    // The quote's box where the server found the quote on the page; else the chunk's box alone.
    const quotePlaced = placeBox(quoteBox, cited.quote_bbox, cited.page_width, cited.page_height);
    if (!quotePlaced && !chunkPlaced) return;
    const [x0, , x1] = quotePlaced ? cited.quote_bbox : location.bbox;
    zoomTo = { share: (x1 - x0) / cited.page_width, target: quotePlaced ? quoteBox : box };
    show(zoomLine, zoom(true));
  };
  pageImage.removeAttribute("src");
  pageImage.src = cited.thumbnail_url;
}

// Zoomed, the render is drawn wide enough for the boxed passage to fill most of the dialog's
// width, at most twice the render's own size (more would only blur it), and scrolled to it;
// the button goes back to the whole page and forth. False when zooming would add nothing.
const scroller = dialog.querySelector(".page-scroll");
const zoomLine = dialog.querySelector(".zoom-line");
const zoomButton = zoomLine.querySelector("button");
const ZOOM_FILL = 0.8; // the box's share of the visible width, zoomed
const ZOOM_MAX = 2; // times the render's own width
let zoomTo = null;

function zoom(on) {
  pageView.classList.remove("zoomed");
  pageView.style.width = "";
  zoomButton.dataset.zoomed = "";
  zoomButton.textContent = strings.zoom_in;
  if (!on || !zoomTo || !pageImage.naturalWidth) return false;
  const fit = pageImage.getBoundingClientRect().width;
  const width = Math.min(pageImage.naturalWidth * ZOOM_MAX, (scroller.clientWidth * ZOOM_FILL) / Math.max(zoomTo.share, 0.05));
  if (width < fit * 1.15) {
    zoomTo.target.scrollIntoView({ block: "center" });
    return false;
  }
  pageView.classList.add("zoomed");
  pageView.style.width = `${Math.round(width)}px`;
  zoomButton.dataset.zoomed = "yes";
  zoomButton.textContent = strings.whole_page;
  zoomTo.target.scrollIntoView({ block: "center", inline: "center" });
  return true;
}

zoomButton.addEventListener("click", () => zoom(!zoomButton.dataset.zoomed));

// The bbox is in the page's own units (PDF points, pixels of a picture): as a share of the
// page's size it lands on the render at whatever size the render was drawn.
function placeBox(target, bbox, width, height) {
  if (!Array.isArray(bbox) || bbox.length !== 4 || !width || !height) return false;
  const [x0, y0, x1, y1] = bbox;
  if ((x1 - x0) / width > 0.95 && (y1 - y0) / height > 0.95) return false; // the whole page: nothing to point at
  const percent = (value, whole) => `${Math.max(0, Math.min(100, (value / whole) * 100))}%`;
  target.style.left = percent(x0, width);
  target.style.top = percent(y0, height);
  target.style.width = percent(x1 - x0, width);
  target.style.height = percent(y1 - y0, height);
  show(target);
  return true;
}

function showPreview(preview) {
  resetDialog(`[${preview.n}] ${preview.file}`, preview.place, "", preview.snippet ?? "");
}

function showMissing(n) {
  resetDialog(format(strings.source, { n }), "", "", format(strings.not_cited, { n }));
}

dialog.querySelector(".close").addEventListener("click", () => dialog.close());
dialog.addEventListener("click", (event) => {
  if (event.target === dialog) dialog.close(); // a click on the backdrop
});
dialog.addEventListener("close", () => {
  video.pause();
  opener?.focus();
});

// -- feedback on an answer: thumbs, a comment or a correction (/api/messages/<id>/feedback/) --

async function callApi(method, url, body) {
  const headers = { Accept: "application/json", "X-CSRFToken": root.dataset.csrf };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    credentials: "same-origin",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) throw new Error(readableError(data, response));
  return data;
}

// DRF's errors: {"detail": "..."} or {"field": ["...", ...], ...}, as one line a person reads.
function readableError(data, response) {
  if (!data || typeof data !== "object") return `${response.status} ${response.statusText}`;
  return Object.values(data)
    .flat()
    .map((message) => String(message))
    .join(" ");
}

function feedbackUrl(turn) {
  return `/api/messages/${turn.dataset.message}/feedback/`;
}

function showRating(box, rating) {
  box.dataset.rating = rating ?? "";
  for (const button of box.querySelectorAll("button.rate")) {
    button.setAttribute("aria-pressed", String(button.dataset.rating === rating));
  }
  show(box.querySelector(".withdraw"), Boolean(rating));
}

function feedbackStatus(box, text, error = "") {
  box.querySelector(".feedback-status").textContent = text;
  const alert = box.querySelector(".feedback-error");
  alert.textContent = error;
  show(alert, Boolean(error));
}

function showSaved(box, saved) {
  showRating(box, saved.rating);
  const form = box.querySelector(".feedback-form");
  form.elements.comment.value = saved.comment ?? "";
  form.elements.correct_answer.value = saved.correct_answer ?? "";
  const select = form.elements.correct_document;
  const chosen = saved.correct_document ? String(saved.correct_document) : "";
  if (chosen && ![...select.options].some((option) => option.value === chosen)) {
    select.append(new Option(saved.correct_document_name ?? chosen, chosen));
  }
  select.value = chosen;
  form.elements.correct_page.value = saved.correct_page ?? "";
  feedbackStatus(box, strings.feedback_saved);
}

async function rate(button) {
  const turn = button.closest(".answer-turn");
  const box = button.closest(".feedback");
  if (!turn.dataset.message || box.dataset.rating === button.dataset.rating) return;
  try {
    // Feedback already given keeps its comment and correction; new feedback is the rating.
    const saved = box.dataset.rating
      ? await callApi("PATCH", feedbackUrl(turn), { rating: button.dataset.rating })
      : await callApi("PUT", feedbackUrl(turn), { rating: button.dataset.rating });
    showSaved(box, saved);
  } catch (failure) {
    feedbackStatus(box, "", format(strings.feedback_failed, { error: failure.message }));
  }
}

async function saveFeedback(form) {
  const turn = form.closest(".answer-turn");
  const box = form.closest(".feedback");
  if (!box.dataset.rating) {
    feedbackStatus(box, "", strings.feedback_rate_first);
    box.querySelector("button.rate").focus();
    return;
  }
  const documentId = form.elements.correct_document.value;
  const page = form.elements.correct_page.value;
  const body = {
    rating: box.dataset.rating,
    comment: form.elements.comment.value,
    correct_answer: form.elements.correct_answer.value,
    correct_document: documentId ? Number(documentId) : null,
    correct_page: page ? Number(page) : null,
  };
  try {
    showSaved(box, await callApi("PUT", feedbackUrl(turn), body));
  } catch (failure) {
    feedbackStatus(box, "", format(strings.feedback_failed, { error: failure.message }));
  }
}

async function withdrawFeedback(button) {
  const turn = button.closest(".answer-turn");
  const box = button.closest(".feedback");
  try {
    await callApi("DELETE", feedbackUrl(turn));
    // Emptied, not reset(): a reset brings back what the page was rendered with.
    const form = box.querySelector(".feedback-form");
    for (const name of ["comment", "correct_answer", "correct_document", "correct_page"]) form.elements[name].value = "";
    showRating(box, "");
    feedbackStatus(box, strings.feedback_removed);
  } catch (failure) {
    feedbackStatus(box, "", format(strings.feedback_failed, { error: failure.message }));
  }
}

// The right document's choices, read when the form first opens: the documents this answer
// cited first, then those of every collection it searched.
async function loadDocuments(details) {
  if (details.dataset.loaded) return;
  details.dataset.loaded = "1";
  const turn = details.closest(".answer-turn");
  const select = details.querySelector("select[name=correct_document]");
  const chosen = select.value;
  const { citations } = citationsOf(turn);
  const cited = new Map();
  for (const item of citations) if (item.document_id) cited.set(String(item.document_id), item.file);
  const groups = [];
  if (cited.size) {
    const group = document.createElement("optgroup");
    group.label = strings.feedback_cited;
    for (const [id, file] of cited) group.append(new Option(file, id));
    groups.push(group);
  }
  const ids = (turn.dataset.collections ?? "").split(",").filter(Boolean);
  const box = details.closest(".feedback");
  feedbackStatus(box, strings.feedback_loading);
  try {
    for (const id of ids) {
      const listing = await callApi("GET", `/api/collections/${id}/documents/?limit=500`);
      const others = listing.results.filter((item) => !cited.has(String(item.id)));
      if (!others.length) continue;
      const group = document.createElement("optgroup");
      // The collection's name as the composer lists it (every collection the user can see).
      const choice = composer.querySelector(`input[name=collections][value="${id}"]`);
      group.label = choice?.parentElement.textContent.trim() ?? "";
      for (const item of others) {
        const label = item.page_count ? format(strings.feedback_pages, { name: item.name, count: item.page_count }) : item.name;
        group.append(new Option(label, String(item.id)));
      }
      groups.push(group);
    }
    feedbackStatus(box, "");
  } catch (failure) {
    feedbackStatus(box, "", failure.message);
  }
  const none = new Option(strings.feedback_no_document, "");
  const keep = chosen && !groups.some((group) => [...group.children].some((option) => option.value === chosen));
  select.replaceChildren(none, ...(keep ? [new Option(select.selectedOptions[0]?.text ?? chosen, chosen)] : []), ...groups);
  select.value = chosen;
}

document.addEventListener(
  "toggle",
  (event) => {
    if (event.target.matches?.(".feedback details.correction") && event.target.open) loadDocuments(event.target);
  },
  true,
);

document.addEventListener("submit", (event) => {
  if (!event.target.classList.contains("feedback-form")) return;
  event.preventDefault();
  saveFeedback(event.target);
});

// -- copy, delete ---------------------------------------------------------------------------

async function copy(button) {
  const turn = button.closest(".answer-turn");
  const text = turn.querySelector(".answer").textContent;
  const status = turn.querySelector(".copy-status");
  try {
    await navigator.clipboard.writeText(text);
    status.textContent = strings.copied;
  } catch {
    // No clipboard API outside secure contexts (plain http on another host): select the text.
    const selection = window.getSelection();
    selection.selectAllChildren(turn.querySelector(".answer"));
    status.textContent = document.execCommand("copy") ? strings.copied : strings.copy_failed;
  }
  setTimeout(() => (status.textContent = ""), 3000);
}

document.addEventListener("click", (event) => {
  const target = event.target.closest("button");
  if (!target) return;
  if (target.classList.contains("citation-link")) openSource(target);
  else if (target.classList.contains("evidence-source")) openEvidence(target);
  else if (target.classList.contains("copy")) copy(target);
  else if (target.classList.contains("rate")) rate(target);
  else if (target.classList.contains("withdraw")) withdrawFeedback(target);
});

const confirmDialog = document.getElementById("confirm-dialog");
let pendingDelete = null;
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.classList.contains("delete-conversation")) return;
  event.preventDefault();
  pendingDelete = form;
  confirmDialog.showModal();
});
document.getElementById("confirm-delete").addEventListener("click", () => pendingDelete?.submit());
document.getElementById("confirm-keep").addEventListener("click", () => confirmDialog.close());

// -- start ----------------------------------------------------------------------------------

for (const turn of list.querySelectorAll(".answer-turn")) {
  // The page carries each stored answer as escaped text (readable without scripts): its
  // Markdown is drawn here, as when it streamed.
  const answer = turn.querySelector(".answer");
  renderText(answer, answer.textContent);
  markUncited(turn, stored[turn.dataset.message] ?? []);
  // What the answer showed while it was made: its evidence (not for a declined answer), the
  // closest passages of a declined one, and how it was found.
  const saved = storedFound[turn.dataset.message];
  if (!saved) continue;
  if (!saved.abstain) for (const item of saved.evidence) addEvidence(turn, item);
  if (answer.textContent.trim()) compactEvidence(turn);
  if (saved.closest.length) handlers.closest(turn, { passages: saved.closest });
  renderFound(turn, saved.mode, saved.decisions);
}
if (list.querySelector(".turn")) list.lastElementChild.scrollIntoView({ block: "end" });
connect();
