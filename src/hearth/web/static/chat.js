// A chat page, live: the stream of the chat's frames, drawn with the markup the server
// rendered for each (the same templates as a reload), and the page's actions (send, Stop,
// approvals, Retry) as fetches carrying the page's CSRF token. Without it the page still
// works as plain forms and reloads.

const list = document.getElementById("transcript");
const stateLine = document.getElementById("stream-state");
const stopForm = document.querySelector("form[data-action=stop]");
const csrf = document.querySelector("meta[name=csrf-token]")?.content ?? "";

let lastSeq = Number(list?.dataset.lastSeq ?? 0);
let source = null;
let retryDelay = 500;

function fragment(html) {
  const holder = document.createElement("template");
  holder.innerHTML = html.trim();
  return holder.content;
}

function streamingItem(runId) {
  let item = document.getElementById("streaming");
  if (!item) {
    item = document.getElementById("streaming-template").content.firstElementChild.cloneNode(true);
    item.id = "streaming";
    list.append(item);
  }
  item.dataset.run = runId;
  return item;
}

function endStreaming() {
  document.getElementById("streaming")?.remove();
}

function onDelta(frame) {
  const text = streamingItem(frame.run_id).querySelector(".text");
  const have = text.textContent.length;
  if (frame.offset === 0 && frame.text.length >= have) {
    text.textContent = frame.text;  // the whole answer so far (a reconnect or a reload)
  } else if (frame.offset + frame.text.length > have && frame.offset <= have) {
    text.textContent += frame.text.slice(have - frame.offset);
  }
}

function onMessage(frame) {
  if (frame.seq <= lastSeq) return;  // already on the page: a replay is drawn once
  lastSeq = frame.seq;
  list.dataset.lastSeq = String(lastSeq);
  list.querySelector(".empty")?.remove();
  const kind = frame.message.kind;
  if (kind === "assistant") endStreaming();
  const card = frame.target ? document.getElementById(frame.target) : null;
  if (kind === "tool_result" && card) {
    card.querySelector(".result-slot").replaceChildren(fragment(frame.html));
    card.querySelector(".approval-slot").replaceChildren();
    return;
  }
  const drawn = fragment(kind === "tool_result" ? frame.orphan_html : frame.html);
  const streaming = document.getElementById("streaming");
  if (streaming) list.insertBefore(drawn, streaming); else list.append(drawn);
}

function onApproval(frame) {
  const card = document.getElementById(frame.target);
  if (card) card.querySelector(".approval-slot").replaceChildren(fragment(frame.html));
}

function setRunning(runId) {
  list.dataset.running = runId ?? "";
  if (stopForm) stopForm.hidden = !runId;
}

function onStatus(frame) {
  setRunning(frame.running ? frame.run_id : null);
  if (frame.running && frame.run_id) {
    for (const badge of list.querySelectorAll(`[data-run="${CSS.escape(frame.run_id)}"] .queued`)) {
      badge.remove();
    }
  }
}

function onDone(frame) {
  endStreaming();
  for (const slot of list.querySelectorAll(`[data-run="${CSS.escape(frame.run_id)}"] .approval-slot`)) {
    slot.replaceChildren();  // an approval the ending withdrew
  }
  for (const waiting of list.querySelectorAll(`[data-run="${CSS.escape(frame.run_id)}"] .waiting`)) {
    waiting.textContent = "Not run.";
  }
  if (list.dataset.running === frame.run_id) setRunning(null);
}

const handlers = { delta: onDelta, message: onMessage, approval: onApproval, status: onStatus,
                   done: onDone };

function connect() {
  const key = encodeURIComponent(list.dataset.key);
  source = new EventSource(`/chats/${key}/stream?after=${lastSeq}`);
  source.onopen = () => {
    retryDelay = 500;
    stateLine.textContent = "";
    document.documentElement.dataset.stream = "open";
  };
  source.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    handlers[frame.type]?.(frame);
  };
  source.onerror = () => {  // reconnect from the last seq this page drew, never from the start
    source.close();
    document.documentElement.dataset.stream = "reconnecting";
    stateLine.textContent = "Connection lost; reconnecting…";
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 8000);
  };
}

function newMessageId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function submit(form, submitter) {
  const status = form.querySelector(".action-status");
  const body = new URLSearchParams(new FormData(form, submitter));
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  let answer;
  try {
    answer = await fetch(form.action, {
      method: "POST", body, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "X-Requested-With": "fetch" },
    });
  } catch {
    if (status) status.textContent = "The gateway could not be reached; try again.";
    for (const button of form.querySelectorAll("button")) button.disabled = false;
    return;
  }
  const data = await answer.json().catch(() => ({}));
  for (const button of form.querySelectorAll("button")) button.disabled = false;
  if (!answer.ok) {
    const error = data.error ?? {};
    if (status) status.textContent = error.message ?? `The gateway answered ${answer.status}.`;
    if (error.code === "retry_repeats_steps" && error.confirm) {
      form.querySelector("input[name=confirm]").value = error.confirm;
      form.querySelector("button").textContent = "Retry anyway";
    }
    return;
  }
  if (form.dataset.action === "send") {
    form.querySelector("textarea").value = "";
    form.querySelector("input[name=client_message_id]").value = newMessageId();
    if (status) status.textContent = "";
  } else if (form.dataset.action === "approval" && status) {
    status.textContent = `Answered: ${data.status}.`;
    for (const button of form.querySelectorAll("button")) button.disabled = true;
  } else if (form.dataset.action === "retry") {
    form.remove();
  }
}

if (list) {
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-action]");
    if (!form) return;
    event.preventDefault();
    submit(form, event.submitter);
  });
  setRunning(list.dataset.running || null);
  connect();
}
