// The shell, live: the sidebar hidden or shown (remembered), the phone drawer, the theme
// toggle without a reload, and the keyboard: New chat (Ctrl+Shift+O), / to search, and in a
// menu Esc to close it and the arrows to move. Without this script every one of them still
// works as a link or a form.

const root = document.documentElement;
root.classList.add("js");

const SIDEBAR = "hearth.sidebar";
function remembered(name) {
  try { return localStorage.getItem(name); } catch { return null; }
}
function remember(name, value) {
  try { localStorage.setItem(name, value); } catch { /* private mode: not remembered */ }
}

if (remembered(SIDEBAR) === "hidden") root.dataset.sidebar = "hidden";
for (const button of document.querySelectorAll("[data-collapse-sidebar]")) {
  button.addEventListener("click", () => {
    const hidden = root.dataset.sidebar !== "hidden";
    if (hidden) root.dataset.sidebar = "hidden"; else delete root.dataset.sidebar;
    remember(SIDEBAR, hidden ? "hidden" : "shown");
  });
}

function setDrawer(open) {
  if (open) root.dataset.drawer = "open"; else delete root.dataset.drawer;
  if (open) document.querySelector(".sidebar .new-chat")?.focus();
}
document.querySelector("[data-open-drawer]")?.addEventListener("click", (event) => {
  event.preventDefault();
  setDrawer(true);
});
for (const closer of document.querySelectorAll(".drawer-close, .drawer-backdrop")) {
  closer.addEventListener("click", (event) => {
    event.preventDefault();
    setDrawer(false);
  });
}
// --- menus (<details class="menu">): Esc closes, arrows move, a click outside closes --------
function openMenu() {
  return document.querySelector("details.menu[open]");
}

function closeMenu(menu, refocus) {
  menu.open = false;
  if (refocus) menu.querySelector(":scope > summary")?.focus();
}

const ITEMS = "button:not([disabled]), a[href]";  // what the arrows step through (a field keeps them)

function moveInMenu(menu, step) {
  const items = [...menu.querySelectorAll(`.menu-panel :is(${ITEMS})`)]
    .filter((item) => item.offsetParent !== null);
  if (!items.length) return;
  const at = items.indexOf(document.activeElement);
  items[(at + step + items.length) % items.length].focus();
}

function typing(target) {
  return target instanceof HTMLElement
    && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

document.addEventListener("keydown", (event) => {
  const menu = openMenu();
  if (event.key === "Escape") {
    if (menu) { event.preventDefault(); closeMenu(menu, true); return; }
    if (root.dataset.drawer === "open") setDrawer(false);
  }
  if (menu && (event.key === "ArrowDown" || event.key === "ArrowUp") && !typing(event.target)
      && menu.contains(document.activeElement)) {
    event.preventDefault();
    moveInMenu(menu, event.key === "ArrowDown" ? 1 : -1);
    return;
  }
  if (event.key === "/" && !typing(event.target) && !event.ctrlKey && !event.metaKey
      && !event.altKey) {
    const search = document.getElementById("chat-search");
    if (search && search.offsetParent !== null) {
      event.preventDefault();
      search.focus();
      return;
    }
  }
  if (event.key.toLowerCase() === "o" && event.shiftKey && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    window.location.assign("/");
  }
});

document.addEventListener("click", (event) => {  // a click outside an open menu closes it
  const menu = openMenu();
  if (menu && !menu.contains(event.target)) closeMenu(menu, false);
});
document.addEventListener("toggle", (event) => {  // one menu open at a time; opened, its first item
  const menu = event.target;
  if (!(menu instanceof HTMLDetailsElement) || !menu.classList.contains("menu") || !menu.open) return;
  for (const other of document.querySelectorAll("details.menu[open]")) {
    if (other !== menu) other.open = false;
  }
}, true);

const themeForm = document.querySelector("form[data-theme-form]");
themeForm?.addEventListener("submit", async (event) => {
  event.preventDefault();
  const chosen = event.submitter?.value ?? "system";
  root.dataset.theme = chosen;  // at once; the cookie keeps it for the next page
  for (const button of themeForm.querySelectorAll("button[name=theme]")) {
    button.setAttribute("aria-pressed", String(button.value === chosen));
  }
  const body = new URLSearchParams(new FormData(themeForm, event.submitter));
  const csrf = document.querySelector("meta[name=csrf-token]")?.content ?? "";
  await fetch(themeForm.action, {
    method: "POST", body, credentials: "same-origin",
    headers: { "X-CSRF-Token": csrf, "X-Requested-With": "fetch" },
  }).catch(() => {});
});

// The installed app's shell (sw.js: the gateway's own files, never a page or a chat). Only
// where the browser allows one: https, or this machine's own address.
if ("serviceWorker" in navigator && window.isSecureContext) {
  navigator.serviceWorker.register("/sw.js").catch(() => {});
}
