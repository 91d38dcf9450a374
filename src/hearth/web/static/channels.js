// Where a chat answers: the chat menu's "Continue on …" and "Answer here only" call the API
// (PUT / DELETE /api/sessions/{key}/link, with the page's sign-in cookie and CSRF token), then
// the top bar's badge and the menu's items are redrawn from the answer, and a line in the menu
// says what happened or the gateway's sentence for why not. When the page is shown again (from
// another tab or app) the link is read again (GET /api/sessions/{key}), since a chat can be moved
// from elsewhere. Names are set as text, never as markup.

const menu = document.querySelector("[data-link-menu]");
const badge = document.getElementById("link-badge");
const csrf = document.querySelector("meta[name=csrf-token]")?.content ?? "";

function titled(name) {  // as the server says it (Python's str.title for a plain name)
  return name.toLowerCase().replace(/(^|[^a-z])([a-z])/g, (_, before, letter) =>
    before + letter.toUpperCase());
}

function titleOf(channel) {
  const button = menu?.querySelector(`[data-continue="${CSS.escape(channel)}"]`);
  return button?.dataset.title || titled(channel);
}

function ownOf(channel) {  // "your DM", "your mail": what the owner's own thread is called
  const button = menu?.querySelector(`[data-continue="${CSS.escape(channel)}"]`);
  return button?.dataset.own || "your DM";
}

function span(className, text) {
  return Object.assign(document.createElement("span"), { className, textContent: text });
}

function apply(link) {  // the badge's words as _chat_link.html draws them
  if (badge) {
    badge.hidden = !link;
    const words = badge.querySelector(".link-words");
    words.replaceChildren();
    if (link) {
      words.append(span("link-lead", "Answers on "), titleOf(link.channel));
      if (link.owner_dm) words.append(span("link-dm", ` · ${ownOf(link.channel)}`));
    }
  }
  if (!menu) return;
  for (const button of menu.querySelectorAll("[data-continue]")) {
    button.hidden = link?.channel === button.dataset.continue;
  }
  const here = menu.querySelector("[data-answer-here]");
  if (here) here.hidden = !link;
}

function say(text, isError = false) {
  const line = menu.querySelector("[data-link-status]");
  line.textContent = text;
  line.classList.toggle("error", isError);
}

async function move(method, body) {
  const key = encodeURIComponent(menu.dataset.key);
  const buttons = [...menu.querySelectorAll("button")];
  for (const button of buttons) button.disabled = true;
  say("");
  try {
    const answer = await fetch(`/api/sessions/${key}/link`, {
      method, credentials: "same-origin", body: body ? JSON.stringify(body) : undefined,
      headers: { "Content-Type": "application/json", Accept: "application/json",
                 "X-CSRF-Token": csrf, "X-Requested-With": "fetch" },
    });
    const data = await answer.json().catch(() => ({}));
    if (!answer.ok) {
      say(data.error?.message ?? `The gateway answered ${answer.status}.`, true);
      return;
    }
    apply(data.link ?? null);
    say(data.link ? `This chat continues on ${titleOf(data.link.channel)}; it answers here too.`
                  : "This chat answers here only now.");
  } catch {
    say("The gateway could not be reached; nothing was changed.", true);
  } finally {
    for (const button of buttons) button.disabled = false;
  }
}

async function reread() {
  const key = encodeURIComponent(menu.dataset.key);
  try {
    const answer = await fetch(`/api/sessions/${key}?limit=1`, {
      credentials: "same-origin", headers: { Accept: "application/json" } });
    if (answer.ok) apply((await answer.json()).link ?? null);
  } catch { /* the gateway is away: the chat's stream says so */ }
}

if (menu) {
  menu.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button || button.disabled) return;
    if (button.dataset.continue) move("PUT", { channel: button.dataset.continue });
    else if (button.hasAttribute("data-answer-here")) move("DELETE", null);
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") reread();
  });
}
