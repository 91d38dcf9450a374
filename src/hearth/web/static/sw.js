// The dashboard's service worker (served as /sw.js, so it may answer for every page): it keeps
// the shell, the gateway's own files under /static/ (the stylesheet, the scripts, the icons
// and an offline page), so the installed app opens, and says so when the gateway is away.
// It never keeps a page, a chat, a stream or anything the API answers: only /static/ files
// are put in its cache, and every page is asked of the gateway each time.

const CACHE = "hearth-shell-1";
const OFFLINE = "/static/offline.html";
const SHELL = [OFFLINE, "/static/hearth.css", "/static/hearth.svg", "/static/icon-192.png"];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL))
    .then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((names) => Promise.all(names.filter((n) => n !== CACHE).map((n) => caches.delete(n))))
    .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return;
  if (url.pathname.startsWith("/static/")) {
    event.respondWith(shellFile(request, url.pathname));
  } else if (request.mode === "navigate") {  // a page: the gateway's, or the offline page
    event.respondWith(fetch(request).catch(() => caches.match(OFFLINE)));
  }
});

// A /static/ file: the gateway's copy when it answers (kept, under its path alone, so a new
// version replaces the old), the kept copy when it does not.
async function shellFile(request, path) {
  try {
    const answer = await fetch(request);
    if (answer.ok) (await caches.open(CACHE)).put(path, answer.clone());
    return answer;
  } catch {
    return (await caches.match(path)) ?? Response.error();
  }
}
