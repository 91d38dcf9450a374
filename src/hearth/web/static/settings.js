// Settings in sections: the nav shows one section at a time, the one the address names
// (/settings#models, or a place inside one: #add-model opens Models there). A page drawn
// for a refused form opens the form's section (the layout's data-open). Without this
// script every section is shown, one after another, and the nav's links scroll to them.

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
