// A chat page, live: the stream of the chat's frames, drawn with the markup the server
// rendered for each (the same templates as a reload); the page's actions (send, Stop,
// approvals, Retry) as fetches carrying the page's CSRF token; following the newest line
// unless the reader scrolled up (then a "Jump to latest" button); a "Thinking…" or
// "Running tool…" line with the time while a turn has nothing new to show; and copy
// buttons on answers and code blocks. Without it the page still works as plain forms.
// Branching (Regenerate, Edit, Rewind, Fork, the variants' pager) posts the same way; when a
// chat's head moves (a `path` frame, from this tab or another) the list is fetched again and
// swapped in, and the chat map's rail is redrawn after each turn.

const list = document.getElementById("transcript");
const stateLine = document.getElementById("stream-state");
const turnStatus = document.getElementById("turn-status");
const turnNote = document.getElementById("turn-note");  // "Moved to b: a failed (HTTP 503)."
const jump = document.getElementById("jump");
const stopForm = document.querySelector("form[data-action=stop]");
const csrf = document.querySelector("meta[name=csrf-token]")?.content ?? "";

let lastSeq = Number(list?.dataset.lastSeq ?? 0);
let source = null;
let retryDelay = 500;
let lastChange = Date.now();  // when the turn last showed something new
let ticker = null;

// --- following the newest line -------------------------------------------------------------
const NEAR = 80;  // px from the bottom that still counts as "at the bottom"
let following = true;

function atBottom() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - NEAR;
}

function toBottom(smooth = false) {
  window.scrollTo({ top: document.documentElement.scrollHeight,
                    behavior: smooth ? "smooth" : "instant" });
}

function changed() {
  lastChange = Date.now();
  decorate(list);
  if (following) toBottom(); else if (jump) jump.hidden = false;
  showTurnStatus();
}

window.addEventListener("scroll", () => {
  following = atBottom();
  if (following && jump) jump.hidden = true;
}, { passive: true });
// The reader moving up lets go at once, before the next frame could pull the page down.
window.addEventListener("wheel", (event) => { if (event.deltaY < 0) following = false; },
                        { passive: true });
window.addEventListener("touchmove", () => { following = atBottom(); }, { passive: true });
document.addEventListener("keydown", (event) => {
  if (["PageUp", "ArrowUp", "Home"].includes(event.key) && event.target === document.body) {
    following = false;
  }
});

jump?.addEventListener("click", () => {
  following = true;
  jump.hidden = true;
  toBottom();
});

// --- copy buttons ---------------------------------------------------------------------------
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {  // not a secure context (a LAN address over http): the old way
    const area = Object.assign(document.createElement("textarea"), { value: text });
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  const label = button.querySelector("span");
  label.textContent = "Copied";
  button.classList.add("done");
  setTimeout(() => { label.textContent = "Copy"; button.classList.remove("done"); }, 1500);
}

function copyButton(what, text) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.setAttribute("aria-label", `Copy ${what}`);
  button.append(Object.assign(document.createElement("span"), { textContent: "Copy" }));
  button.addEventListener("click", () => copyText(text(), button));
  return button;
}

// --- read aloud -------------------------------------------------------------------------------
// The speak chain's model reads the answer (POST …/speech, by the message's place); with none
// set up (404 no_speak_model) the browser's own voice does. Pressed again, it stops.
let speaking = null;

function hush() {
  if (speaking) { speaking.pause(); speaking = null; }
  window.speechSynthesis?.cancel();
}

async function readAloud(answer, button) {
  if (button.getAttribute("aria-pressed") === "true") {
    hush();
    button.setAttribute("aria-pressed", "false");
    return;
  }
  hush();
  button.setAttribute("aria-pressed", "true");
  const done = () => button.setAttribute("aria-pressed", "false");
  const text = answer.querySelector(".markdown").innerText.trim();
  const url = `/api/sessions/${encodeURIComponent(list.dataset.key)}/speech`;
  const answered = await fetch(url, {
    method: "POST", credentials: "same-origin",
    body: JSON.stringify({ index: Number(answer.dataset.seq) }),
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf,
               "X-Requested-With": "fetch" },
  }).catch(() => null);
  if (answered?.ok) {
    speaking = new Audio(URL.createObjectURL(await answered.blob()));
    speaking.addEventListener("ended", done);
    button.title = `Read by ${answered.headers.get("X-Hearth-Spoken-By")}`;
    speaking.play().catch(done);
  } else if (window.speechSynthesis) {
    const utterance = new SpeechSynthesisUtterance(text);
    utterance.addEventListener("end", done);
    window.speechSynthesis.speak(utterance);
  } else {
    done();
  }
}

function readButton(answer) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "read-aloud";
  button.setAttribute("aria-pressed", "false");
  button.setAttribute("aria-label", "Read aloud the answer");
  button.append(Object.assign(document.createElement("span"), { textContent: "Read aloud" }));
  button.addEventListener("click", () => readAloud(answer, button));
  return button;
}

function decorate(scope) {
  for (const answer of scope.querySelectorAll(".item.assistant:not(.streaming)")) {
    const tools = answer.querySelector(".answer-tools");
    const markdown = answer.querySelector(".markdown");
    if (tools && markdown && !tools.querySelector(".copy")) {
      const copy = copyButton("the answer", () => markdown.innerText.trim());
      const pager = tools.querySelector(":scope > .pager");
      if (pager) pager.after(copy); else tools.prepend(copy);
      if (answer.dataset.seq) copy.after(readButton(answer));
    }
  }
  for (const head of scope.querySelectorAll(".markdown .code-head:not(:has(> .copy))")) {
    const code = head.parentElement.querySelector("pre");
    head.append(copyButton("the code", () => code.innerText.replace(/\n$/, "")));
  }
}

// --- what the turn is doing -------------------------------------------------------------------
// What the running turn is doing, and since when (ms; null: since the page last changed).
// A wait on you counts from when it was asked, so a reload does not start it again.
function runningWhat() {
  const run = list.dataset.running;
  if (!run) return [null, null];
  const mine = list.querySelectorAll(`[data-run="${CSS.escape(run)}"]`);
  for (const item of [...mine].reverse()) {
    const card = item.querySelector(".card");
    if (!card) continue;
    const asking = card.querySelector(".approval-slot form");
    if (asking) return ["Waiting for your answer", Number(asking.dataset.asked) * 1000 || null];
    if (card.querySelector(".result-slot .waiting")) return [`Running ${card.dataset.tool}…`, null];
    break;
  }
  return ["Thinking…", null];
}

function showTurnStatus() {
  if (!turnStatus) return;
  const [what, since] = runningWhat();
  const streaming = document.getElementById("streaming");
  const quiet = Date.now() - lastChange > 600;
  turnStatus.hidden = !what || (streaming !== null && !quiet);
  if (turnStatus.hidden) return;
  turnStatus.querySelector(".what").textContent = what;
  const seconds = Math.floor((Date.now() - (since ?? lastChange)) / 1000);
  turnStatus.querySelector(".elapsed").textContent = seconds < 1 ? ""
    : seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

function tick(on) {
  if (on && !ticker) ticker = setInterval(showTurnStatus, 250);
  if (!on && ticker) { clearInterval(ticker); ticker = null; }
  showTurnStatus();
}

// --- frames ----------------------------------------------------------------------------------
function fragment(html) {
  const holder = document.createElement("template");
  holder.innerHTML = html.trim();
  return holder.content;
}

// Where an item of `runId` goes: right after that turn's last item (so a message sent while
// the turn ran, drawn at the end, stays after the turn's answer, as a reload draws it), or at
// the end when the turn has none on the page yet. The node to insert before (null: the end).
function placeFor(runId, streaming = document.getElementById("streaming")) {
  const mine = runId
    ? [...list.querySelectorAll(`:scope > [data-run="${CSS.escape(runId)}"]`)].filter((i) => i !== streaming)
    : [];
  if (mine.length) {
    const next = mine[mine.length - 1].nextElementSibling;
    return next === streaming && streaming?.dataset.run === runId ? streaming : next;
  }
  return streaming?.dataset.run === runId || !runId ? streaming : null;
}

function streamingItem(runId) {
  let item = document.getElementById("streaming");
  if (!item) {
    item = document.getElementById("streaming-template").content.firstElementChild.cloneNode(true);
    item.id = "streaming";
    item.dataset.run = runId;
    list.insertBefore(item, placeFor(runId, null));
  }
  item.dataset.run = runId;
  return item;
}

let gatewayBoot = "";
let live = false;  // past this connection's replay (its first status): frames happen now

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
  const steered = kind === "user" ? frame.message.meta?.steered : null;
  if (steered?.run) {  // taken into the running turn: drawn where it was taken, not where sent
    list.querySelector(`.item.user[data-run="${CSS.escape(steered.run)}"]`)?.remove();
  }
  const card = frame.target ? document.getElementById(frame.target) : null;
  if (kind === "tool_result" && card) {
    card.querySelector(".result-slot").replaceChildren(fragment(frame.html));
    card.querySelector(".approval-slot").replaceChildren();
    return;
  }
  const drawn = fragment(kind === "tool_result" ? frame.orphan_html : frame.html);
  drawnDuringRefresh?.push(...drawn.children);
  list.insertBefore(drawn, placeFor(frame.run_id));
}

// A notification while this tab is in the background, when Settings turned them on: what
// happened, never what was said (a restricted chat's words stay on the page).
function notify(body, tag) {
  let on = false;
  try { on = localStorage.getItem("hearth.notify") === "on"; } catch { /* private mode */ }
  if (!on || document.visibilityState !== "hidden" || !("Notification" in window)
      || Notification.permission !== "granted") return;
  const shown = new Notification("Hearth", { body, tag: `${list.dataset.key}:${tag}`,
                                             icon: "/static/icon-192.png" });
  shown.onclick = () => { window.focus(); shown.close(); };
}

const WAITS_FOR_YOU = "Not run yet: it waits for your answer.";

function onApproval(frame) {
  if (frame.html && live) notify("A tool call waits for your answer.", "approval");
  const card = document.getElementById(frame.target);
  if (card) {
    card.querySelector(".approval-slot").replaceChildren(fragment(frame.html));
    const waiting = card.querySelector(".result-slot .waiting");  // asked: nothing runs yet
    if (waiting) waiting.textContent = frame.html ? WAITS_FOR_YOU : "Running…";
  }
  refresh("side");  // the chat's "Waiting" and the Approvals count, asked or answered
}

function setRunning(runId) {
  list.dataset.running = runId ?? "";
  if (stopForm) stopForm.hidden = !runId;
  tick(Boolean(runId));
}

function onStatus(frame) {
  live = true;
  // another start of the gateway counts its offsets from 0 again: what streamed before the
  // restart is the store's (a kept partial comes back as a message), not the new stream's.
  // Each connection's first status says the start; the live ones after it do not.
  if (frame.boot) {
    if (gatewayBoot && frame.boot !== gatewayBoot) endStreaming();
    gatewayBoot = frame.boot;
  }
  setRunning(frame.running ? frame.run_id : null);
  if (turnNote && frame.note) {
    turnNote.textContent = frame.note;
    turnNote.hidden = false;
  }
  if (frame.running && frame.run_id) {
    for (const badge of list.querySelectorAll(`[data-run="${CSS.escape(frame.run_id)}"] .queued`)) {
      badge.remove();
    }
  }
}

function onDone(frame) {
  if (live) notify("The answer is ready.", "done");
  endStreaming();
  if (turnNote) turnNote.hidden = true;  // the answer's own line says it from now on
  let withdrawn = false;
  for (const slot of list.querySelectorAll(`[data-run="${CSS.escape(frame.run_id)}"] .approval-slot`)) {
    withdrawn ||= slot.childElementCount > 0;
    slot.replaceChildren();  // an approval the ending withdrew
  }
  for (const waiting of list.querySelectorAll(`[data-run="${CSS.escape(frame.run_id)}"] .waiting`)) {
    waiting.textContent = "Not run.";
    waiting.classList.remove("waiting");
  }
  if (list.dataset.running === frame.run_id) setRunning(null);
  refresh(withdrawn || WIDE.matches ? "side" : "map");  // the sidebar's pulse and "Waiting"
}

const handlers = { delta: onDelta, message: onMessage, approval: onApproval, status: onStatus,
                   done: onDone, path: () => { moves += 1; refresh("all"); } };

function connect() {
  const key = encodeURIComponent(list.dataset.key);
  // an earlier window of the chat follows what is said from now on, never replays what
  // came after it (that is the newer page's)
  const after = Math.max(lastSeq, Number(list.dataset.liveAfter ?? 0));
  live = false;
  source = new EventSource(`/chats/${key}/stream?after=${after}`);
  source.onopen = () => {
    retryDelay = 500;
    stateLine.textContent = "";
    document.documentElement.dataset.stream = "open";
  };
  source.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    handlers[frame.type]?.(frame);
    changed();
  };
  source.onerror = () => {  // reconnect from the last seq this page drew, never from the start
    source.close();
    document.documentElement.dataset.stream = "reconnecting";
    stateLine.textContent = "Connection lost; reconnecting…";
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 8000);
  };
}

// --- branching: the list fetched again when the head moves -----------------------------------
// A `path` frame (or this page's own Regenerate, Edit, Rewind or variant) fetches the page again
// and swaps its list and map in; a `done` redraws the map. Requests while one is out are one
// more fetch after it, never several at once. Items a frame drew while the fetch was out, later
// than what it read, are kept.
const BRANCHING = ["regenerate", "edit", "rewind", "variant"];
const WIDE = window.matchMedia("(min-width: 70rem)");  // where the map's rail is shown
let drawnDuringRefresh = null;
let refreshing = null;
let refreshAgain = null;  // "all" or "map": what to fetch once the fetch out is done
let keepInView = null;  // {index, top}: the pager clicked stays where it was
let moves = 0;  // `path` frames seen: a form's answer after one has nothing more to fetch

const REACH = { map: 1, side: 2, all: 3 };  // what a fetch swaps in: each the one before, and more

function refresh(what) {
  if (refreshing) {
    if (!refreshAgain || REACH[what] > REACH[refreshAgain]) refreshAgain = what;
    return refreshing;
  }
  refreshing = (async () => {
    for (let next = what; next; next = refreshAgain) {
      refreshAgain = null;
      await refreshOnce(next);
    }
  })().finally(() => { refreshing = null; });
  return refreshing;
}

async function refreshOnce(what) {
  if (what === "map" && !WIDE.matches) return;
  drawnDuringRefresh = what === "all" ? [] : null;
  let doc = null;
  try {
    const answer = await fetch(window.location.pathname + window.location.search,
                               { credentials: "same-origin" });
    if (answer.ok) doc = new DOMParser().parseFromString(await answer.text(), "text/html");
  } catch { /* the gateway is away: the stream's reconnect says so */ }
  const drawn = drawnDuringRefresh ?? [];
  drawnDuringRefresh = null;
  if (!doc) return;
  const map = document.getElementById("chat-map");
  const freshMap = doc.getElementById("chat-map");
  if (map && freshMap) map.replaceWith(freshMap);
  swapSidebar(doc);
  if (what === "all") swapList(doc, drawn);
  trackPlace();
}

// The sidebar's chat list, the Approvals count and the chat's title, as the page fetched
// again draws them (the list's own element stays, so its scroll does too).
function swapSidebar(doc) {
  const title = document.querySelector(".topbar .page-title");
  const freshTitle = doc.querySelector(".topbar .page-title");
  if (title && freshTitle && title.textContent !== freshTitle.textContent) {
    title.replaceChildren(...freshTitle.childNodes);
    document.title = doc.title;
  }
  const nav = document.querySelector(".sidebar .chat-nav");
  const freshNav = doc.querySelector(".sidebar .chat-nav");
  if (nav && freshNav) nav.replaceChildren(...freshNav.childNodes);
  const approvals = document.querySelector(".page-nav a[href='/approvals']");
  const freshApprovals = doc.querySelector(".page-nav a[href='/approvals']");
  if (approvals && freshApprovals) approvals.replaceChildren(...freshApprovals.childNodes);
}

function swapList(doc, drawn) {
  const fresh = doc.getElementById("transcript");
  if (!fresh) return;
  const freshLast = Number(fresh.dataset.lastSeq ?? 0);
  const later = drawn.filter((item) => item.isConnected && Number(item.dataset.seq) > freshLast);
  const streaming = document.getElementById("streaming");
  list.replaceChildren(...fresh.childNodes);
  for (const item of later) list.insertBefore(item, placeFor(item.dataset.run, null));
  if (streaming) list.insertBefore(streaming, placeFor(streaming.dataset.run, null));
  lastSeq = Math.max(freshLast, ...later.map((item) => Number(item.dataset.seq)));
  list.dataset.lastSeq = String(lastSeq);
  const earlier = document.querySelector(".chat-column > .earlier");
  const freshEarlier = doc.querySelector(".chat-column > .earlier");
  if (earlier && freshEarlier) earlier.replaceWith(freshEarlier);
  else if (earlier) earlier.remove();
  else if (freshEarlier) list.before(freshEarlier);
  decorate(list);
  if (keepInView) {
    const pager = list.querySelector(`.pager input[name=index][value="${keepInView.index}"]`);
    if (pager) window.scrollBy(0, pager.form.getBoundingClientRect().top - keepInView.top);
    keepInView = null;
  } else if (following) {
    toBottom();
  }
}

// --- asking before a step runs again ----------------------------------------------------------
// The repeat guard's 409 (retry_repeats_steps): the steps that may repeat are listed under the
// form, its confirm value filled in, and its button says "… anyway"; pressing it is the yes.
function askToRepeat(form, error) {
  form.querySelector("input[name=confirm]").value = error.confirm;
  const button = form.querySelector("button[type=submit], button:not([type])");
  if (button) button.textContent = form.dataset.confirmLabel || "Retry anyway";
  const steps = error.steps ?? [];
  const status = form.querySelector(".action-status");
  const noun = steps.length === 1 ? "step" : "steps";
  if (status) {
    status.textContent = `Running this again may repeat ${steps.length} ${noun} that may ` +
      `already have changed something. Press “${button?.textContent}” to go ahead.`;
  }
  form.querySelector(".repeat-steps")?.remove();
  const shown = Object.assign(document.createElement("ul"), { className: "repeat-steps" });
  for (const step of steps) {
    const what = [step.tool, step.target].filter(Boolean).join(" ");
    shown.append(Object.assign(document.createElement("li"),
                               { textContent: step.receipt ? `${what}: ${step.receipt}` : what }));
  }
  (status ?? button)?.after(shown);
}

// --- editing a message of yours ---------------------------------------------------------------
function openEdit(button) {
  const item = button.closest(".item.user");
  if (!item || item.querySelector(".edit-form")) return;
  const form = document.getElementById("edit-template").content.firstElementChild.cloneNode(true);
  form.querySelector("input[name=index]").value = button.dataset.index;
  const area = form.querySelector("textarea");
  area.value = item.querySelector(".bubble .text")?.textContent ?? "";
  item.classList.add("editing");
  item.querySelector(".bubble").after(form);
  const fit = () => { area.style.height = "auto"; area.style.height = `${area.scrollHeight}px`; };
  area.addEventListener("input", fit);
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (area.value.trim()) form.requestSubmit();
    } else if (event.key === "Escape") {
      event.preventDefault();
      closeEdit(form);
    }
  });
  form.querySelector("[data-cancel]").addEventListener("click", () => closeEdit(form));
  fit();
  area.focus();
  area.setSelectionRange(area.value.length, area.value.length);
}

function closeEdit(form) {
  const item = form.closest(".item");
  form.remove();
  item?.classList.remove("editing");
  item?.querySelector("[data-edit]")?.focus();
}

// --- a message's menu, and the map's rail -----------------------------------------------------
function closeMenus(except = null) {
  for (const menu of list.querySelectorAll("details.msg-menu[open]")) {
    if (menu !== except) menu.open = false;
  }
}

function onPageClick(event) {
  const edit = event.target.closest("[data-edit]");
  if (edit) { openEdit(edit); return; }
  closeMenus(event.target.closest("details.msg-menu"));
  const link = event.target.closest(".chat-map a[data-seq]");
  const target = link && document.getElementById(`seq-${link.dataset.seq}`);
  if (!target) return;  // not on this page: the link opens the page of the chat that holds it
  event.preventDefault();
  following = false;
  const still = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  target.scrollIntoView({ block: "start", behavior: still ? "instant" : "smooth" });
  history.replaceState(null, "", `#seq-${link.dataset.seq}`);
  target.classList.add("flash");
  setTimeout(() => target.classList.remove("flash"), 1600);
}

let placeFrame = 0;
function trackPlace() {  // the map's tick of the exchange being read
  placeFrame = 0;
  const map = document.getElementById("chat-map");
  if (!map || map.hidden || !WIDE.matches) return;
  const users = [...list.querySelectorAll(".item.user")];
  const line = window.innerHeight * 0.35;
  let current = atBottom() ? users.at(-1) : null;
  if (!current) current = users.filter((item) => item.getBoundingClientRect().top <= line).at(-1);
  for (const link of map.querySelectorAll("a[data-seq]")) {
    if (current && link.dataset.seq === current.dataset.seq) {
      link.setAttribute("aria-current", "location");
    } else {
      link.removeAttribute("aria-current");
    }
  }
}

// --- the page's forms as fetches -------------------------------------------------------------
function newMessageId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function settle(form, data, movesBefore) {
  const status = form.querySelector(".action-status");
  if (form.dataset.action === "send") {
    form.reset();
    form.querySelector("input[name=client_message_id]").value = newMessageId();
    following = true;
    lastChange = Date.now();
  } else if (form.dataset.action === "approval" && status) {
    status.textContent = `Answered: ${data.status}.`;
    for (const button of form.querySelectorAll("button")) button.disabled = true;
  } else if (form.dataset.action === "retry") {
    form.remove();
  } else if (form.dataset.action === "fork") {
    window.location.assign(data.url);
  } else if (BRANCHING.includes(form.dataset.action)) {
    if (form.dataset.action !== "variant") following = true;  // the new turn is at the end
    if (moves === movesBefore) refresh("all");  // else the `path` frame fetched it already
  }
}

async function submit(form, submitter) {
  const status = form.querySelector(".action-status");
  const body = new URLSearchParams(new FormData(form, submitter));
  const buttons = [...form.querySelectorAll("button")].filter((button) => !button.disabled);
  for (const button of buttons) button.disabled = true;
  const movesBefore = moves;
  if (form.dataset.action === "variant") {
    keepInView = { index: form.querySelector("input[name=index]").value,
                   top: form.getBoundingClientRect().top };
  }
  let answer;
  try {
    answer = await fetch(form.action, {
      method: "POST", body, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "X-Requested-With": "fetch" },
    });
  } catch {
    if (status) status.textContent = "The gateway could not be reached; try again.";
    for (const button of buttons) button.disabled = false;
    keepInView = null;
    return;
  }
  const data = await answer.json().catch(() => ({}));
  for (const button of buttons) button.disabled = false;
  if (!answer.ok) {
    const error = data.error ?? {};
    if (status) status.textContent = error.message ?? `The gateway answered ${answer.status}.`;
    if (error.code === "retry_repeats_steps" && error.confirm) askToRepeat(form, error);
    keepInView = null;
    return;
  }
  if (status) status.textContent = "";
  form.querySelector(".repeat-steps")?.remove();
  settle(form, data, movesBefore);
}

if (list) {
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-action]");
    if (!form) return;
    event.preventDefault();
    submit(form, event.submitter);
  });
  document.addEventListener("click", onPageClick);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeMenus();
  });
  window.addEventListener("scroll", () => {
    if (!placeFrame) placeFrame = requestAnimationFrame(trackPlace);
  }, { passive: true });
  decorate(list);
  const asked = window.location.hash.startsWith("#seq-")
    ? document.getElementById(window.location.hash.slice(1)) : null;
  if (asked) {
    asked.scrollIntoView({ block: "start", behavior: "instant" });  // still there once drawn
  } else if (!window.location.hash && !new URLSearchParams(window.location.search).has("before")) {
    toBottom();  // a chat opens at its newest line
  }
  trackPlace();
  setRunning(list.dataset.running || null);
  connect();
}

// --- a voice note's length --------------------------------------------------------------------
// Shown beside its player. A note recorded in a browser often says no length (Infinity) until
// it has been read through, so it is sought to its end once, silently, and back to the start.
function showLength(event) {
  const audio = event.target;
  if (!(audio instanceof HTMLAudioElement)) return;
  const label = audio.parentElement?.querySelector(".audio-length");
  if (!label) return;
  if (Number.isFinite(audio.duration)) {
    const seconds = Math.max(1, Math.round(audio.duration));
    label.textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
    if (audio.dataset.probing) {
      delete audio.dataset.probing;
      audio.currentTime = 0;
    }
  } else if (!audio.dataset.probing) {
    audio.dataset.probing = "1";
    audio.currentTime = 1e101;  // past the end: the browser reads through and finds the length
  }
}
document.addEventListener("loadedmetadata", showLength, true);  // media events do not bubble
document.addEventListener("durationchange", showLength, true);
