// Saved prompts in the composer: a message that starts with @ lists the saved prompts whose
// names start with what follows it (GET /api/prompts, with the page's sign-in cookie, fetched
// once the first time). Arrow keys move, Enter or Tab picks, Escape closes, a click picks.
// Picking writes "@name " into the box, with the prompt's named placeholders as "key=" and the
// caret after the first. The form works without it: the gateway expands the mention.
const box = document.getElementById("text");
const composer = box?.closest(".composer");
const SHOWN = 8; // prompts listed at once
const NAME = /^\s*@([a-z0-9_-]*)$/; // the message so far is a mention's name being typed

const list = document.createElement("ul");
list.id = "mention-list";
list.className = "mentions";
list.setAttribute("role", "listbox");
list.setAttribute("aria-label", "Saved prompts");
list.hidden = true;

let loading = null; // the prompts, once asked for
let folder = "";
let shown = []; // the prompts listed now
let active = 0;
let dismissed = false; // Escape closed the list for this mention

function load() {
  loading ??= fetch("/api/prompts", { headers: { Accept: "application/json" } })
    .then((answer) => (answer.ok ? answer.json() : { prompts: [] }))
    .then((body) => {
      folder = typeof body.folder === "string" ? body.folder : "";
      return Array.isArray(body.prompts) ? body.prompts : [];
    })
    .catch(() => {
      loading = null; // asked again at the next @
      return [];
    });
  return loading;
}

function typedName() {
  if (box.selectionStart !== box.selectionEnd) return null;
  const found = NAME.exec(box.value.slice(0, box.selectionStart));
  return found ? found[1] : null;
}

function close() {
  list.hidden = true;
  shown = [];
  box.removeAttribute("aria-activedescendant");
}

function span(className, text) {
  const part = document.createElement("span");
  part.className = className;
  part.textContent = text;
  return part;
}

function option(prompt, index) {
  const item = document.createElement("li");
  item.id = `mention-${index}`;
  item.className = "mention";
  item.setAttribute("role", "option");
  item.append(span("mention-name", `@${prompt.name}`), span("mention-about", prompt.description));
  if (prompt.placeholders.length) {
    item.append(span("mention-uses", prompt.placeholders.map((n) => `{{${n}}}`).join(" ")));
  }
  item.addEventListener("mousedown", (event) => event.preventDefault()); // the box keeps focus
  item.addEventListener("click", () => pick(prompt));
  return item;
}

function emptyNote() {
  const item = document.createElement("li");
  item.className = "mention-empty";
  item.setAttribute("aria-disabled", "true");
  item.textContent = "No saved prompts yet. Save one as a Markdown file (say summarize.md) in "
    + `${folder || "the prompts folder of Hearth's home"}, then reload this page.`;
  return item;
}

function highlight(index) {
  active = (index + shown.length) % shown.length;
  for (const [i, item] of [...list.children].entries()) {
    item.setAttribute("aria-selected", String(i === active));
    if (i === active) item.scrollIntoView({ block: "nearest" });
  }
  box.setAttribute("aria-activedescendant", `mention-${active}`);
}

async function update() {
  const name = typedName();
  if (name === null) {
    dismissed = false;
    close();
    return;
  }
  if (dismissed) return;
  const prompts = await load();
  if (typedName() !== name) return; // typed on meanwhile: that input's update draws it
  shown = prompts.filter((p) => p.name.startsWith(name)).slice(0, SHOWN);
  if (!shown.length && (prompts.length || name)) {
    close();
    return;
  }
  list.replaceChildren(...(shown.length ? shown.map(option) : [emptyNote()]));
  list.hidden = false;
  if (shown.length) highlight(0);
}

function pick(prompt) {
  const caretAt = box.selectionStart;
  const lead = /^\s*/.exec(box.value)[0];
  const rest = box.value.slice(caretAt).replace(/^[a-z0-9_-]*[ \t]*/, "");
  const named = prompt.placeholders.filter((n) => n !== "arguments" && !/^arg[1-9]$/.test(n));
  const head = `${lead}@${prompt.name} `;
  const keys = named.map((n) => `${n}=`).join(" ");
  box.value = head + keys + (rest && keys ? " " : "") + rest;
  const caret = named.length ? head.length + named[0].length + 1 : head.length;
  close();
  box.focus();
  box.setSelectionRange(caret, caret);
  box.dispatchEvent(new Event("input", { bubbles: true })); // the box fits its new text
}

function onKey(event) {
  if (list.hidden || event.target !== box || event.isComposing) return;
  if (event.key === "Escape") {
    dismissed = true;
    close();
  } else if (!shown.length) {
    return;
  } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    highlight(active + (event.key === "ArrowDown" ? 1 : -1));
  } else if ((event.key === "Enter" && !event.shiftKey) || (event.key === "Tab" && !event.shiftKey)) {
    pick(shown[active]);
  } else {
    return;
  }
  event.preventDefault();
  event.stopPropagation(); // before the composer's own Enter (it would send)
}

if (box && composer) {
  composer.append(list);
  box.setAttribute("aria-autocomplete", "list");
  box.setAttribute("aria-controls", list.id);
  composer.addEventListener("keydown", onKey, true);
  box.addEventListener("input", update);
  box.addEventListener("click", update);
  box.addEventListener("blur", close);
  box.form?.addEventListener("submit", close);
  if (box.value && document.activeElement === box) update(); // typed before this script ran
}
