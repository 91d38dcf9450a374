// Files in the composer: the paperclip, files dropped on the composer, an image pasted into
// the box, a voice note recorded with the microphone button. Each is uploaded to the chat at once (POST /api/sessions/{key}/attachments) and
// shown in the tray above the box (a picture, or its name; a button takes it out again); the
// message sends the uploads its hidden `attachments` field names, and may then have no text.
// Send waits while a file is still on its way. Without this script the form sends text.
//
// On the new-chat page there is no chat to upload to yet (`data-upload` is absent): the files
// wait in the tray, and Send makes the chat, uploads them and sends the message, then opens
// the chat (the chat is deleted again if any step fails, so a failed send leaves none).
const input = document.getElementById("files");
const form = input?.closest("form");
const tray = document.getElementById("tray");
const box = document.getElementById("text");
const field = form?.querySelector("input[name=attachments]");
const csrf = form?.querySelector("input[name=csrf]")?.value ?? "";
const send = form?.querySelector("button.send");
const held = !input?.dataset.upload;  // the new-chat page: files wait for the chat
let uploading = 0;

function size(bytes) {
  return bytes >= 1048576 ? `${(bytes / 1048576).toFixed(1)} MB`
    : `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

function sync() {
  const ids = [...tray.querySelectorAll("li[data-id]")].map((li) => li.dataset.id);
  if (field) field.value = ids.join(" ");
  tray.hidden = tray.children.length === 0;
  box.required = ids.length === 0 && waiting.size === 0;  // a message may be files alone
  send.disabled = uploading > 0;
  send.title = uploading > 0 ? "Waiting for the files to upload" : "";
}

function chip(file) {
  const li = document.createElement("li");
  li.className = "pending";
  if (file.type.startsWith("image/")) {
    const picture = document.createElement("img");  // its picture once uploaded (the page's
    picture.alt = "";  // policy loads images from the gateway alone)
    picture.hidden = true;
    li.append(picture);
  }
  const name = document.createElement("span");
  name.className = "file-name";
  name.textContent = file.name || "pasted image";
  const status = document.createElement("span");
  status.className = "file-size";
  status.setAttribute("role", "status");
  status.textContent = "Uploading…";
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "remove";
  remove.setAttribute("aria-label", `Remove ${name.textContent}`);
  remove.textContent = "×";
  remove.addEventListener("click", () => { li.remove(); sync(); box.focus(); });
  li.append(name, status, remove);
  return li;
}

const waiting = new Map();  // the new-chat page's files, by their chip, until Send

async function upload(file) {
  const li = chip(file);
  tray.append(li);
  if (held) {
    waiting.set(li, file);
    li.className = "";
    li.querySelector("[role=status]").textContent = size(file.size);
    li.querySelector(".remove").addEventListener("click", () => { waiting.delete(li); sync(); });
    sync();
    return;
  }
  uploading += 1;
  sync();
  const status = li.querySelector("[role=status]");
  try {
    const name = encodeURIComponent(file.name || "pasted image");
    const answer = await fetch(`${input.dataset.upload}?name=${name}`, {
      method: "POST", body: file, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "X-Requested-With": "fetch" },
    });
    const data = await answer.json().catch(() => ({}));
    if (answer.ok) {
      li.dataset.id = data.id;
      li.className = "";
      status.textContent = size(data.size);
      const picture = li.querySelector("img");
      if (picture && data.type.startsWith("image/")) {
        picture.src = `${input.dataset.upload}/${encodeURIComponent(data.id)}`;
        picture.hidden = false;
      }
    } else {
      li.className = "failed";
      status.textContent = data.error?.message ?? `The gateway answered ${answer.status}.`;
    }
  } catch {
    li.className = "failed";
    status.textContent = "The gateway could not be reached; try again.";
  } finally {
    uploading -= 1;
    sync();
  }
}

function take(files) {
  for (const file of files) upload(file);
}

async function call(url, init) {
  const answer = await fetch(url, { credentials: "same-origin", ...init,
    headers: { "X-CSRF-Token": csrf, "X-Requested-With": "fetch", ...(init.headers ?? {}) } });
  const data = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new Error(data.error?.message ?? `The gateway answered ${answer.status}.`);
  return data;
}

// The new-chat page's Send with files: the chat, its files, its first message, then open it.
async function startWithFiles() {
  const fields = new FormData(form);
  const status = form.querySelector(".action-status");
  const json = { "Content-Type": "application/json" };
  send.disabled = true;
  let key = null;
  try {
    const chosen = { memory_mode: fields.get("memory_mode") || "persistent" };
    if (fields.get("agent") && fields.get("agent") !== "default") chosen.agent = fields.get("agent");
    if (fields.get("model")) chosen.model = fields.get("model");
    key = (await call("/api/sessions", { method: "POST", headers: json,
                                          body: JSON.stringify(chosen) })).key;
    const base = `/api/sessions/${encodeURIComponent(key)}`;
    const ids = [];
    for (const file of waiting.values()) {
      const name = encodeURIComponent(file.name || "pasted image");
      ids.push((await call(`${base}/attachments?name=${name}`, { method: "POST", body: file })).id);
    }
    await call(`${base}/messages`, { method: "POST", headers: json, body: JSON.stringify({
      text: fields.get("text") ?? "", attachments: ids,
      client_message_id: fields.get("client_message_id") }) });
    window.location.assign(`/chats/${encodeURIComponent(key)}`);
  } catch (failure) {
    if (key) await fetch(`/api/sessions/${encodeURIComponent(key)}`, { method: "DELETE",
      credentials: "same-origin", headers: { "X-CSRF-Token": csrf } }).catch(() => null);
    status.textContent = failure.message;
    send.disabled = false;
  }
}

// A voice note: the microphone's sound recorded (MediaRecorder) until pressed again, then
// uploaded as any file; the gateway hears its words when it is sent.
let recorder = null;

async function record(button) {
  if (recorder) {
    recorder.stop();
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch {
    button.title = "The microphone could not be used (allow it in the browser's settings).";
    return;
  }
  const pieces = [];
  const began = Date.now();
  const time = button.querySelector(".recording-time");
  const tick = setInterval(() => {
    const seconds = Math.floor((Date.now() - began) / 1000);
    time.textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
  }, 250);
  recorder = new MediaRecorder(stream);
  recorder.addEventListener("dataavailable", (event) => pieces.push(event.data));
  recorder.addEventListener("stop", () => {
    clearInterval(tick);
    for (const track of stream.getTracks()) track.stop();
    recorder = null;
    button.setAttribute("aria-pressed", "false");
    button.setAttribute("aria-label", "Record a voice note");
    time.textContent = "";
    const kind = pieces[0]?.type || "audio/webm";
    const stamp = new Date().toTimeString().slice(0, 5).replace(":", "");
    take([new File(pieces, `voice note ${stamp}.webm`, { type: kind })]);
  });
  recorder.start(250);
  button.setAttribute("aria-pressed", "true");
  button.setAttribute("aria-label", "Stop recording");
}

if (input && form && tray) {
  const attach = document.getElementById("attach");
  attach.hidden = false;
  attach.addEventListener("click", () => input.click());
  input.addEventListener("change", () => { take(input.files); input.value = ""; });
  const zone = form.closest(".composer-box") ?? form;
  zone.addEventListener("dragover", (event) => {
    if (![...event.dataTransfer.types].includes("Files")) return;
    event.preventDefault();
    zone.classList.add("dropping");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dropping"));
  zone.addEventListener("drop", (event) => {
    zone.classList.remove("dropping");
    if (!event.dataTransfer.files.length) return;
    event.preventDefault();
    take(event.dataTransfer.files);
  });
  box.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files ?? [])];
    if (!files.length) return;
    event.preventDefault();
    take(files);
  });
  const microphone = document.getElementById("record");
  if (microphone && navigator.mediaDevices?.getUserMedia && window.MediaRecorder) {
    microphone.hidden = false;
    microphone.addEventListener("click", () => record(microphone));
  }
  form.addEventListener("reset", () => { tray.replaceChildren(); requestAnimationFrame(sync); });
  if (held) {
    form.addEventListener("submit", (event) => {
      if (waiting.size === 0) return;  // text alone: the form posts as ever
      event.preventDefault();
      startWithFiles();
    });
  }
  form.dataset.attachReady = "true";
}
