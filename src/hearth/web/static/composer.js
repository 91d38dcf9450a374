// The composer: Enter sends, Shift+Enter starts a new line. (The form works without it.)
const box = document.getElementById("text");
if (box) {
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (box.value.trim()) box.form.requestSubmit();
    }
  });
}
