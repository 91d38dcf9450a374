// The composer: Enter sends, Shift+Enter starts a new line, and the box grows with what is
// typed (up to a limit, then it scrolls). The form works without it.
const box = document.getElementById("text");

function fit() {
  box.style.height = "auto";
  box.style.height = `${box.scrollHeight}px`;
}

if (box) {
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (box.value.trim() || !box.required) box.form.requestSubmit();  // or files alone
    }
  });
  box.addEventListener("input", fit);
  box.form.addEventListener("reset", () => requestAnimationFrame(fit));
  box.dataset.ready = "true";  // Enter sends from now on (a page's tests wait for it)
}
