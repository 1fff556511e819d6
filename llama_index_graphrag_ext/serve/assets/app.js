// The page of `graphrag-ext serve`: one column per chosen index, answers streamed as
// server-sent events over fetch, passages with their file, position and evidence.
// Plain DOM, no framework and nothing from a CDN. Text is set with textContent only.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

async function loadIndexes() {
  const reply = await fetch("/api/indexes");
  const { indexes } = await reply.json();
  const box = $("indexes");
  const wanted = new URLSearchParams(location.search).getAll("index");
  indexes.forEach((info, i) => {
    const label = el("label");
    const box_ = el("input");
    box_.type = "checkbox";
    box_.value = info.name;
    box_.checked = wanted.length ? wanted.includes(info.name) : i === 0;
    label.append(box_, ` ${info.name} (${info.method}, ${info.chunks} chunks)`);
    box.append(label);
  });
  return indexes;
}

function chosen() {
  return [...document.querySelectorAll("#indexes input:checked")].map((b) => b.value);
}

function renderEvidence(evidence) {
  const list = el("dl", "evidence");
  for (const [key, value] of Object.entries(evidence || {})) {
    list.append(el("dt", null, key));
    const shown = Array.isArray(value)
      ? value.map((v) => (typeof v === "object" ? JSON.stringify(v) : String(v))).join("; ")
      : typeof value === "object" ? JSON.stringify(value) : String(value);
    list.append(el("dd", null, shown));
  }
  return list;
}

const SHOWN_ELSEWHERE = new Set(["method", "rank"]);  // the column and the passage say them

function renderGraph(graph) {
  const box = el("div", "graph");
  box.append(el("strong", null, "linked in the graph to: "));
  const names = graph.nodes.map((n) => `${n.label} (${n.kind})`);
  if (graph.more) names.push(`${graph.more} more`);
  box.append(document.createTextNode(names.join(", ")));
  return box;
}

function renderPassage(p) {
  const box = el("div", "passage");
  let where = `#${p.rank} ${p.file}, chars ${p.start_char}-${p.end_char}`;
  if (p.page !== null && p.page !== undefined) where += `, page ${p.page}`;
  if (p.score !== null && p.score !== undefined) where += `, score ${p.score.toFixed(4)}`;
  const evidence = Object.fromEntries(
    Object.entries(p.evidence || {}).filter(([key]) => !SHOWN_ELSEWHERE.has(key)),
  );
  box.append(el("div", "where", where), el("div", "text", p.text), renderEvidence(evidence));
  if (p.graph) box.append(renderGraph(p.graph));
  return box;
}

function parseEvents(buffer, onEvent) {
  // Frames end with a blank line; returns what is left of an unfinished frame.
  let cut;
  while ((cut = buffer.indexOf("\n\n")) >= 0) {
    const frame = buffer.slice(0, cut);
    buffer = buffer.slice(cut + 2);
    let kind = "message", data = "";
    for (const line of frame.split("\n")) {
      if (line.startsWith("event: ")) kind = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    onEvent(kind, JSON.parse(data || "{}"));
  }
  return buffer;
}

async function ask(name, column, question, topK, answer) {
  const head = el("h2", null, name);
  const meta = el("div", "meta", "asking...");
  const answerBox = el("div", "answer");
  const passages = el("div", "passages");
  column.append(head, meta, answerBox, passages);
  const reply = await fetch("/api/query", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ index: name, question, top_k: topK, answer, stream: true }),
  });
  if (!reply.ok) {
    const { error } = await reply.json();
    meta.replaceWith(el("div", "error", error));
    answerBox.remove();
    return;
  }
  const reader = reply.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const onEvent = (kind, data) => {
    if (kind === "passages") data.passages.forEach((p) => passages.append(renderPassage(p)));
    else if (kind === "token") answerBox.textContent += data.text;
    else if (kind === "done") {
      meta.textContent = `${data.method}, answered by ${data.llm}`;
      if (data.answer === null) answerBox.remove();
      if (data.note) meta.after(el("div", "note", data.note));
      column.dataset.done = "1";
    } else if (kind === "error") {
      meta.after(el("div", "error", data.error));
      column.dataset.done = "1";
    }
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), onEvent);
  }
}

async function submit(event) {
  if (event) event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const columns = $("columns");
  columns.replaceChildren();
  const topK = parseInt($("top-k").value, 10) || 5;
  const answer = $("answer").checked;
  await Promise.all(
    chosen().map((name) => {
      const column = el("section", "column");
      column.dataset.index = name;
      columns.append(column);
      return ask(name, column, question, topK, answer).catch((err) => {
        column.append(el("div", "error", String(err)));
        column.dataset.done = "1";
      });
    }),
  );
  document.body.dataset.answered = "1";
}

(async function start() {
  await loadIndexes();
  $("ask").addEventListener("submit", submit);
  const params = new URLSearchParams(location.search);
  if (params.get("k")) $("top-k").value = params.get("k");
  if (params.get("answer") === "0") $("answer").checked = false;
  if (params.get("q")) {  // a shared link asks at once
    $("question").value = params.get("q");
    await submit();
  }
})();
