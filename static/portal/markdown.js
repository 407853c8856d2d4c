// The answer's Markdown as DOM nodes: paragraphs, headings, lists, tables, code blocks,
// inline code, bold and italic, and each [n] (or [1, 2], 【1】) as a citation button.
// Safe by construction: every piece of the model's text becomes a text node; nothing it
// writes is ever parsed as HTML, so a passage saying "<img onerror=…>" shows as those
// characters. Links stay text (an answer cites passages, it does not send people away).
// Half-written Markdown while streaming renders as far as it goes (an open ``` fence is a
// code block to the end).

export const CITATION = /[[【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]】]/g; // as assistant/answering/answer.py

const INLINE = /(`+)([^`]+?)\1|\*\*([^*]+?)\*\*|__([^_]+?)__|\*([^*\s][^*]*?)\*|[[【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]】]/g;
const FENCE = /^\s*(```|~~~)/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d{1,3})[.)]\s+(.*)$/;
const TABLE_ROW = /^\s*\|.*\|\s*$/;
const TABLE_RULE = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;
const QUOTE = /^\s*>\s?(.*)$/;

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

// Inline Markdown of one line into `parent`; `citation(n)` makes the button for [n].
function inline(parent, text, citation) {
  let position = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > position) parent.append(text.slice(position, match.index));
    if (match[2] !== undefined) {
      const code = el("code");
      code.textContent = match[2];
      parent.append(code);
    } else if (match[3] !== undefined || match[4] !== undefined) {
      const strong = el("strong");
      inline(strong, match[3] ?? match[4], citation);
      parent.append(strong);
    } else if (match[5] !== undefined) {
      const em = el("em");
      inline(em, match[5], citation);
      parent.append(em);
    } else {
      for (const number of match[6].split(/[,，、]/)) parent.append(citation(Number(number.trim())));
    }
    position = match.index + match[0].length;
  }
  if (position < text.length) parent.append(text.slice(position));
}

function cells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => cell.trim());
}

// The blocks of `text` into `container` (its children are replaced).
export function renderMarkdown(container, text, citation) {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let paragraph = null;
  let listNode = null;
  const closeParagraph = () => {
    paragraph = null;
  };
  const closeList = () => {
    listNode = null;
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (FENCE.test(line)) {
      closeParagraph();
      closeList();
      const fence = line.trim().slice(0, 3);
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) {
        body.push(lines[i]);
        i += 1;
      }
      const pre = el("pre");
      const code = el("code");
      code.textContent = body.join("\n");
      pre.append(code);
      blocks.push(pre);
      continue;
    }
    if (!line.trim()) {
      closeParagraph();
      closeList();
      continue;
    }
    if (TABLE_ROW.test(line) && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      closeParagraph();
      closeList();
      const table = el("table", "answer-table");
      const head = el("thead");
      const headRow = el("tr");
      for (const cell of cells(line)) {
        const th = el("th");
        inline(th, cell, citation);
        headRow.append(th);
      }
      head.append(headRow);
      const tbody = el("tbody");
      i += 2;
      while (i < lines.length && TABLE_ROW.test(lines[i])) {
        const row = el("tr");
        for (const cell of cells(lines[i])) {
          const td = el("td");
          inline(td, cell, citation);
          row.append(td);
        }
        tbody.append(row);
        i += 1;
      }
      i -= 1;
      table.append(head, tbody);
      blocks.push(table);
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      closeParagraph();
      closeList();
      // Answers sit under the page's own headings: # becomes h3, ## h4 and so on.
      const node = el(`h${Math.min(6, heading[1].length + 2)}`);
      inline(node, heading[2], citation);
      blocks.push(node);
      continue;
    }
    const bullet = line.match(BULLET);
    const numbered = bullet ? null : line.match(NUMBERED);
    if (bullet || numbered) {
      closeParagraph();
      const tag = bullet ? "ul" : "ol";
      if (!listNode || listNode.tagName.toLowerCase() !== tag) {
        listNode = el(tag);
        if (numbered && numbered[1] !== "1") listNode.start = Number(numbered[1]);
        blocks.push(listNode);
      }
      const item = el("li");
      inline(item, bullet ? bullet[1] : numbered[2], citation);
      listNode.append(item);
      continue;
    }
    const quoted = line.match(QUOTE);
    if (quoted) {
      closeParagraph();
      closeList();
      const node = el("blockquote");
      inline(node, quoted[1], citation);
      blocks.push(node);
      continue;
    }
    closeList();
    if (paragraph) paragraph.append(document.createElement("br"));
    else {
      paragraph = el("p");
      blocks.push(paragraph);
    }
    inline(paragraph, line, citation);
  }
  container.replaceChildren(...blocks);
}

// `text` with `quote` highlighted (a <mark>) in `container`; the first occurrence, compared
// with whitespace collapsed. Returns the <mark>, or null when the quote is not in the text.
export function highlight(container, text, quote) {
  const plain = text.split(/\s+/).join(" ").trim();
  const wanted = (quote || "").split(/\s+/).join(" ").trim();
  const at = wanted ? plain.indexOf(wanted) : -1;
  if (at < 0) {
    container.replaceChildren(plain);
    return null;
  }
  const mark = el("mark");
  mark.textContent = wanted;
  container.replaceChildren(plain.slice(0, at), mark, plain.slice(at + wanted.length));
  return mark;
}
