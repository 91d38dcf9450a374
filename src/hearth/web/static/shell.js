// The shell, live: the sidebar hidden or shown (remembered), the phone drawer, the theme
// toggle without a reload, and New chat from the keyboard (Ctrl+Shift+O). Without this
// script every one of them still works as a link or a form.

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
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && root.dataset.drawer === "open") setDrawer(false);
  if (event.key.toLowerCase() === "o" && event.shiftKey && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    window.location.assign("/");
  }
});

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
