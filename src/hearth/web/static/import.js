// The chat list's Import form: the chosen file (a JSONL export) is posted to /api/import as it
// is; the chats it made are listed with links, or the gateway's sentence says why nothing was
// imported (the line and what is wrong with it).

const form = document.querySelector("form[data-import-form]");
const result = form?.querySelector("[data-import-result]");

function say(text, isError) {
  result.replaceChildren();
  const line = document.createElement("p");
  line.className = isError ? "error" : "notice";
  line.textContent = text;
  result.append(line);
  return line;
}

function listMade(made) {
  const line = say(`Imported ${made.length} chat${made.length === 1 ? "" : "s"}.`, false);
  const list = document.createElement("ul");
  for (const chat of made) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = `/chats/${encodeURIComponent(chat.key)}`;
    link.textContent = chat.title || chat.key;
    item.append(link);
    for (const note of chat.notes || []) item.append(` ${note}`);
    list.append(item);
  }
  line.after(list);
}

form?.addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = form.querySelector("input[type=file]").files[0];
  if (!file) return;
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  say(`Importing ${file.name}…`, false);
  const csrf = document.querySelector("meta[name=csrf-token]")?.content ?? "";
  try {
    const answer = await fetch(form.action, {
      method: "POST", body: file, credentials: "same-origin",
      headers: { "Content-Type": "application/x-ndjson", "X-CSRF-Token": csrf,
                 "X-Requested-With": "fetch" },
    });
    const body = await answer.json().catch(() => ({}));
    if (answer.ok) listMade(body.imported || []);
    else {
      const sentence = body.error?.message || `The gateway answered ${answer.status}.`;
      say(answer.status === 413 ? `${sentence} Import it with \`hearth import FILE\`.` : sentence,
          true);
    }
  } catch {
    say("The gateway could not be reached; nothing was imported.", true);
  } finally {
    button.disabled = false;
  }
});
