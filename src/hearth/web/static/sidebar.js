// The sidebar's chats, live: each chat's ⋯ menu (Rename in place, Pin, Move to folder, Tags,
// Archive, Delete after a dialog) and a chat dragged onto a folder moved into it. Every change
// is the API's (PATCH or DELETE /api/sessions/{key}, with the page's sign-in cookie and CSRF
// token); then the sidebar's chats are drawn again by the gateway (GET /sidebar). The menu is
// a button and a role=menu: Enter or Space opens it at its first item, the arrows, Home and End
// move, Esc closes it (back to its button), Tab or a click outside closes it; it needs no
// hover, so it works the same on a phone. Names are set as text, never as markup.

const nav = document.querySelector("[data-chat-nav]");
const menu = document.getElementById("chat-item-menu");
const csrf = document.querySelector("meta[name=csrf-token]")?.content ?? "";
const CHAT = "application/x-hearth-chat";  // what a dragged chat carries: its key
const here = location.pathname.match(/^\/chats\/([^/]+)$/);
const current = here ? decodeURIComponent(here[1]) : "";  // the chat this page shows
let opened = null;  // { item, button } while the menu is open

async function api(method, key, body) {
  const answer = await fetch(`/api/sessions/${encodeURIComponent(key)}`, {
    method, credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const said = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new Error(said?.error?.message || `The gateway answered ${answer.status}.`);
  return said;
}

async function redraw() {
  const params = new URLSearchParams({ here: location.pathname });
  if (current) params.set("current", current);
  const answer = await fetch(`/sidebar?${params}`, { credentials: "same-origin" });
  if (!answer.ok) return;
  const scrolled = nav.scrollTop;
  nav.innerHTML = await answer.text();  // the gateway's own template, autoescaped
  nav.scrollTop = scrolled;
}

let toastTimer = 0;
function toast(text) {
  const line = document.querySelector("[data-toast]");
  if (!line) return;
  line.textContent = text;
  line.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { line.hidden = true; }, 5000);
}

async function change(item, body, done) {  // a PATCH from the menu or a drop, then redrawn
  try {
    await api("PATCH", item.dataset.key, body);
  } catch (failed) {
    toast(failed.message);
    return false;
  }
  await redraw();
  if (done) toast(done);
  return true;
}

// --- the menu ---------------------------------------------------------------------------------

function items() {
  return [...menu.querySelectorAll("[role=menuitem]")].filter((item) => !item.hidden);
}

function place(button) {
  const box = button.getBoundingClientRect();
  const width = menu.offsetWidth;
  const height = menu.offsetHeight;
  const left = Math.max(8, Math.min(box.right - width, innerWidth - width - 8));
  const below = box.bottom + 4;
  const top = below + height > innerHeight - 8 ? Math.max(8, box.top - height - 4) : below;
  menu.style.left = `${left}px`;
  menu.style.top = `${top}px`;
}

function openMenu(item, button) {
  closeMenu(false);
  const kept = item.dataset.mode === "persistent";
  for (const entry of menu.querySelectorAll("[data-kept-only]")) entry.hidden = !kept;
  menu.querySelector("[data-pin-label]").textContent = item.dataset.pinned ? "Unpin" : "Pin";
  menu.setAttribute("aria-label", `Options for ${item.dataset.name}`);
  menu.hidden = false;
  place(button);
  button.setAttribute("aria-expanded", "true");
  item.classList.add("menu-open");
  opened = { item, button };
  items()[0]?.focus();
}

function closeMenu(refocus) {
  if (!opened) return;
  const { item, button } = opened;
  opened = null;
  menu.hidden = true;
  button.setAttribute("aria-expanded", "false");
  item.classList.remove("menu-open");
  if (refocus && button.isConnected) button.focus();
}

nav?.addEventListener("click", (event) => {
  const button = event.target.closest(".chat-more");
  if (!button) return;
  event.preventDefault();
  const item = button.closest(".chat-item");
  if (opened?.button === button) closeMenu(true); else openMenu(item, button);
});
nav?.addEventListener("scroll", () => closeMenu(false), { passive: true });
addEventListener("resize", () => closeMenu(false));

menu?.addEventListener("keydown", (event) => {
  const list = items();
  const at = list.indexOf(document.activeElement);
  const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: list.length - 1 };
  if (event.key in moves) {
    event.preventDefault();
    list[(moves[event.key] + list.length) % list.length]?.focus();
  } else if (event.key === "Escape") {
    event.preventDefault();
    event.stopPropagation();  // the menu closes; the phone's drawer stays open
    closeMenu(true);
  } else if (event.key === "Tab") {
    closeMenu(true);
  }
});

document.addEventListener("pointerdown", (event) => {
  if (opened && !menu.contains(event.target) && !opened.button.contains(event.target)) {
    closeMenu(false);
  }
});

menu?.addEventListener("click", (event) => {
  const entry = event.target.closest("[data-act]");
  if (!entry || !opened) return;
  const { item } = opened;
  closeMenu(entry.dataset.act !== "rename");
  ACTIONS[entry.dataset.act](item);
});

const ACTIONS = {
  rename: renameInPlace,
  pin: (item) => change(item, { pinned: !item.dataset.pinned }),
  folder: (item) => openSheet("folder-dialog", item),
  tags: (item) => openSheet("tags-dialog", item),
  archive: archive,
  delete: (item) => openSheet("delete-dialog", item),
};

async function archive(item) {
  if (await change(item, { archived: true },
    `Archived “${item.dataset.name}”: it is under All chats, Archived.`) &&
      item.dataset.key === current) {
    location.reload();  // this page's banner says it is archived
  }
}

// --- Rename, in place ----------------------------------------------------------------------

function renameInPlace(item) {
  const link = item.querySelector(".chat-link");
  const field = Object.assign(document.createElement("input"), {
    className: "rename-field", value: item.dataset.name, maxLength: 200,
  });
  field.setAttribute("aria-label", "Chat title");
  link.hidden = true;
  item.prepend(field);
  field.focus();
  field.select();
  let settled = false;
  const settle = async (save) => {
    if (settled) return;
    settled = true;
    const title = field.value.trim();
    if (save && title && title !== item.dataset.name && await change(item, { title })) {
      if (item.dataset.key === current) retitle(title);
      return;  // drawn again, with the new name
    }
    field.remove();
    link.hidden = false;
    item.querySelector(".chat-more")?.focus();
  };
  field.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); settle(true); }
    if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); settle(false); }
  });
  field.addEventListener("blur", () => settle(true));
}

function retitle(title) {  // the page of the chat renamed: its heading and the tab's title
  const heading = document.querySelector(".page-title");
  if (heading) heading.textContent = title;
  document.title = `${title} · Hearth`;
}

// --- the dialogs: Move to folder, Tags, Delete -----------------------------------------------

let sheetItem = null;

function openSheet(id, item) {
  const sheet = document.getElementById(id);
  sheetItem = item;
  for (const name of sheet.querySelectorAll("[data-chat-name]")) name.textContent = item.dataset.name;
  const error = sheet.querySelector("[data-sheet-error]");
  error.hidden = true;
  if (id === "folder-dialog") fillFolders(sheet, item);
  if (id === "tags-dialog") sheet.querySelector("input").value = item.dataset.tags || "";
  sheet.showModal();
  if (id === "tags-dialog") sheet.querySelector("input").focus();
}

function fillFolders(sheet, item) {
  const choices = sheet.querySelector("[data-folder-choices]");
  choices.replaceChildren();
  const names = [...nav.querySelectorAll("[data-drop-folder]")].map((f) => f.dataset.dropFolder);
  for (const name of names) {
    const choice = Object.assign(document.createElement("button"), {
      type: "button", className: "folder-choice", textContent: name,
    });
    choice.dataset.folder = name;
    if (name === item.dataset.folder) choice.setAttribute("aria-current", "true");
    choices.append(choice);
  }
  choices.hidden = names.length === 0;
  sheet.querySelector("input").value = "";
  sheet.querySelector("[data-out-of-folder]").hidden = !item.dataset.folder;
}

async function fromSheet(sheet, body, done) {
  const error = sheet.querySelector("[data-sheet-error]");
  try {
    if (body === null) await api("DELETE", sheetItem.dataset.key);
    else await api("PATCH", sheetItem.dataset.key, body);
  } catch (failed) {
    error.textContent = failed.message;
    error.hidden = false;
    return;
  }
  sheet.close();
  if (body === null && sheetItem.dataset.key === current) {
    location.assign("/");  // this chat is gone: a new one
    return;
  }
  await redraw();
  toast(done);
}

for (const sheet of document.querySelectorAll("dialog.sheet")) {
  sheet.querySelector("[data-sheet-cancel]").addEventListener("click", () => sheet.close());
  sheet.addEventListener("click", (event) => {  // a click on the backdrop closes it
    if (event.target === sheet) sheet.close();
  });
}

const folderSheet = document.getElementById("folder-dialog");
folderSheet?.addEventListener("click", (event) => {
  const choice = event.target.closest("[data-folder]");
  if (choice) fromSheet(folderSheet, { folder: choice.dataset.folder }, `Moved to ${choice.dataset.folder}.`);
  if (event.target.closest("[data-out-of-folder]")) {
    fromSheet(folderSheet, { folder: null }, "Taken out of its folder.");
  }
});
folderSheet?.querySelector("form").addEventListener("submit", (event) => {
  event.preventDefault();
  const name = folderSheet.querySelector("input").value.trim();
  if (name) fromSheet(folderSheet, { folder: name }, `Moved to ${name}.`);
});

const tagsSheet = document.getElementById("tags-dialog");
tagsSheet?.querySelector("form").addEventListener("submit", (event) => {
  event.preventDefault();
  const tags = tagsSheet.querySelector("input").value.split(",").map((t) => t.trim())
    .filter(Boolean);
  fromSheet(tagsSheet, { tags }, tags.length ? `Tagged ${tags.join(", ")}.` : "Tags removed.");
});

const deleteSheet = document.getElementById("delete-dialog");
deleteSheet?.querySelector("form").addEventListener("submit", (event) => {
  event.preventDefault();
  fromSheet(deleteSheet, null, `Deleted “${sheetItem.dataset.name}”.`);
});

// --- drag a chat onto a folder -----------------------------------------------------------------

nav?.addEventListener("dragstart", (event) => {
  const item = event.target.closest?.(".chat-item[data-mode=persistent]");
  if (!item) return;
  event.dataTransfer.setData(CHAT, item.dataset.key);
  event.dataTransfer.effectAllowed = "move";
  item.classList.add("dragging");
  const folders = nav.querySelector("[data-folders]");
  if (folders) folders.open = true;
});
nav?.addEventListener("dragend", (event) => {
  event.target.closest?.(".chat-item")?.classList.remove("dragging");
});

function folderUnder(event) {
  return event.dataTransfer?.types.includes(CHAT) ? event.target.closest?.("[data-drop-folder]") : null;
}
nav?.addEventListener("dragover", (event) => {
  const folder = folderUnder(event);
  if (!folder) return;
  event.preventDefault();
  event.dataTransfer.dropEffect = "move";
  folder.classList.add("drop-over");
});
nav?.addEventListener("dragleave", (event) => {
  event.target.closest?.("[data-drop-folder]")?.classList.remove("drop-over");
});
nav?.addEventListener("drop", async (event) => {
  const folder = folderUnder(event);
  if (!folder) return;
  event.preventDefault();
  const key = event.dataTransfer.getData(CHAT);
  const item = [...nav.querySelectorAll(".chat-item")].find((i) => i.dataset.key === key);
  if (item) await change(item, { folder: folder.dataset.dropFolder }, `Moved to ${folder.dataset.dropFolder}.`);
});
