// Settings in sections: the nav shows one section at a time, the one the address names
// (/settings#models, or a place inside one: #add-model opens Models there). A page drawn
// for a refused form opens the form's section (the layout's data-open). Without this
// script every section is shown, one after another, and the nav's links scroll to them.
// The model form lists the endpoint's models to choose from (POST /api/models/available)
// once its endpoint is given; the name can always be typed.

const layout = document.querySelector(".settings-layout");
const sections = [...layout.querySelectorAll(".settings-section")];
const links = [...document.querySelectorAll(".settings-nav a")];

function show(hash, fresh) {
  const target = hash.length > 1 ? document.getElementById(decodeURIComponent(hash.slice(1))) : null;
  const section = target?.closest(".settings-section")
    ?? sections.find((s) => s.id === layout.dataset.open) ?? sections[0];
  for (const s of sections) s.hidden = s !== section;
  for (const link of links) {
    if (link.hash !== `#${section.id}`) { link.removeAttribute("aria-current"); continue; }
    link.setAttribute("aria-current", "page");
    const strip = link.closest("ul");  // a phone's row of tabs: the open one in sight
    if (strip.scrollWidth > strip.clientWidth) {
      strip.scrollLeft = link.offsetLeft - (strip.clientWidth - link.offsetWidth) / 2;
    }
  }
  if (target && target !== section) target.scrollIntoView({ block: "start" });
  else if (fresh) window.scrollTo({ top: 0 });
}

layout.classList.add("tabbed");
show(window.location.hash, false);
window.addEventListener("hashchange", () => show(window.location.hash, true));

// --- notifications: off until turned on here (chat.js shows them) ---------------------------
const NOTIFY = "hearth.notify";
const notifyButton = document.querySelector("[data-notify]");
const notifyState = document.querySelector("[data-notify-state]");

function notifyOn() {
  try { return localStorage.getItem(NOTIFY) === "on"; } catch { return false; }
}

function showNotify() {
  if (!("Notification" in window)) {
    notifyButton.hidden = true;
    notifyState.textContent = "This browser cannot show notifications.";
    return;
  }
  const on = notifyOn() && Notification.permission === "granted";
  notifyButton.textContent = on ? "Turn off notifications" : "Turn on notifications";
  notifyState.textContent = on ? "On in this browser."
    : Notification.permission === "denied"
      ? "Blocked: allow notifications for this site in the browser's settings, then turn them on."
      : "Off.";
}

notifyButton?.addEventListener("click", async () => {
  if (notifyOn()) {
    localStorage.setItem(NOTIFY, "off");
  } else if (await Notification.requestPermission() === "granted") {
    localStorage.setItem(NOTIFY, "on");
  }
  showNotify();
});
if (notifyButton) showNotify();

// --- the model form: the endpoint's models, to choose the name from -------------------------
const modelForm = document.querySelector("[data-model-form]");

function modelLister(form) {
  const csrf = form.querySelector("input[name=csrf]").value;
  const names = document.getElementById("model-names");
  const state = form.querySelector("[data-list-state]");
  const field = (name) => form.elements.namedItem(name);
  const kind = () => form.querySelector("input[name=kind]:checked")?.value ?? "openai";
  let asked = 0;
  let last = "";

  function say(text, isError) {
    state.textContent = text;
    state.classList.toggle("error", isError);
  }

  function endpoint() {
    const body = { provider: kind(), base_url: field("base_url").value,
                   api_key: field("api_key").value, api_key_env: field("api_key_env").value };
    if (form.dataset.editing) body.model_id = form.dataset.editing;
    return body;
  }

  function given(body) {  // enough said of the endpoint to ask it
    return Boolean(body.base_url.trim() || body.api_key.trim() || body.api_key_env.trim()
                   || body.model_id || body.provider === "ollama");
  }

  async function list(force) {
    const body = endpoint();
    const text = JSON.stringify(body);
    if (!force && (text === last || !given(body))) return;
    last = text;
    const mine = ++asked;
    say("Asking the endpoint which models it offers…", false);
    let answer, data;
    try {
      answer = await fetch("/api/models/available", {
        method: "POST", credentials: "same-origin", body: text,
        headers: { "Content-Type": "application/json", Accept: "application/json",
                   "X-CSRF-Token": csrf, "X-Requested-With": "fetch" } });
      data = await answer.json().catch(() => ({}));
    } catch {
      if (mine === asked) say("The gateway could not be reached to list the models; type the model's name.", true);
      return;
    }
    if (mine !== asked) return;  // a later ask answers instead
    if (!answer.ok) {
      names.replaceChildren();
      const why = data.error?.message ?? `The gateway answered ${answer.status}.`;
      say(`The models could not be listed: ${why} Type the model's name instead.`, true);
      return;
    }
    names.replaceChildren(...data.models.map((name) => new Option(name, name)));
    say(`${data.sentence} Choose one as you type in the name, or type another.`, false);
  }

  // an id not typed by hand follows the name chosen
  const id = field("id");
  let idTyped = Boolean(id.value) || id.readOnly;
  id.addEventListener("input", () => { idTyped = id.value !== ""; });
  field("model").addEventListener("change", () => {
    if (idTyped) return;
    id.value = field("model").value.split("/").pop().replace(/[^A-Za-z0-9_.:-]+/g, "-").slice(0, 64);
  });

  const url = field("base_url");
  for (const name of ["base_url", "api_key", "api_key_env"]) {
    field(name).addEventListener("change", () => list(false));
  }
  for (const radio of form.querySelectorAll("input[name=kind]")) {
    radio.addEventListener("change", () => {
      url.placeholder = { ollama: form.dataset.ollamaUrl, anthropic: "https://api.anthropic.com" }[kind()]
        ?? "https://api.openai.com/v1";
      list(false);
    });
  }
  form.querySelector("[data-list-models]").addEventListener("click", () => list(true));
  list(false);
}

if (modelForm) modelLister(modelForm);
