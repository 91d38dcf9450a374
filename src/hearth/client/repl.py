"""`hearth chat`'s prompt: lines become messages, `/commands` act on the chat.

A chat is made by its first message, not before: `hearth chat` and `/new` only remember that
the next message starts a chat (with the name `--session` gave, and the model `/model` chose),
so starting and leaving without a word leaves nothing behind. `--session KEY` of a kept chat
prints its last messages first, and follows its turn if one is running.

At the prompt, Ctrl-C with nothing typed, Ctrl-D and `/exit` leave; Ctrl-C with a line typed
drops the line. During a turn Ctrl-C stops it (see `turn.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hearth.client import history
from hearth.client.api import GatewayApi, GatewayError, GatewayRefused
from hearth.client.branching import Branching
from hearth.client.terminal import Screen, typed_so_far
from hearth.client.turn import Leave, TurnFollower, take_turn

PROMPT = "you> "
COMMANDS: dict[str, tuple[str, str]] = {  # name: (argument, what it does)
    "/help": ("", "list these commands"),
    "/new": ("", "start a fresh chat (kept once you send its first message)"),
    "/stop": ("", "stop the chat's running turn"),
    "/history": ("", "print the chat's last messages again, each numbered"),
    "/regenerate": ("", "answer your last message again (the answer before stays a variant)"),
    "/variant": ("N", "show variant N of the last answer"),
    "/edit": ("", "change your last message and send it again"),
    "/rewind": ("N", "go back to message N of /history (what came after is set aside)"),
    "/fork": ("N", "copy this chat up to message N of /history into a new chat, and go on "
                   "there"),
    "/compact": ("", "fold the older part of what the model reads into a summary now"),
    "/model": ("NAME", "answer with model NAME from the next turn"),
    "/prompts": ("", "list the saved prompts a message can start with (@name key=value)"),
    "/attach": ("PATH", "send the file at PATH with your next message (an image, a text file, "
                        "a PDF, a recording)"),
    "/exit": ("", "leave (so do Ctrl-D, and Ctrl-C at an empty prompt)"),
}
ALIASES = {"/quit": "/exit"}


def command_list() -> list[str]:
    width = max(len(f"{name} {arg}".strip()) for name, (arg, _) in COMMANDS.items())
    listed = [f"  {f'{name} {arg}'.strip():<{width}}  {what}"
              for name, (arg, what) in COMMANDS.items()]
    return [*listed, "  Start a line with // to send one that begins with /.",
            "  During a turn, Ctrl-C stops it; a second Ctrl-C leaves."]


class Repl:
    """The prompt of one terminal, on one chat at a time."""

    def __init__(self, api: GatewayApi, screen: Screen, session: str | None) -> None:
        self._api = api
        self._screen = screen
        self._key: str | None = None  # the chat, once it is made (or was kept)
        self._name = session  # the name a chat not made yet will have
        self._model: str | None = None  # the model /model chose, for the chats made here
        self._files: list[tuple[str, str]] = []  # (id, name): uploads the next message sends
        self._handlers: dict[str, Callable[[str], bool]] = {
            "/help": self._help, "/new": self._new, "/stop": self._stop,
            "/history": self._history, "/model": self._set_model, "/compact": self._compact,
            "/prompts": self._prompts, "/attach": self._attach,
            "/exit": lambda _: False,
        }
        self._handlers.update(Branching(api, screen, lambda: self._key, self._switch).handlers())

    def run(self) -> int:
        """Until the person leaves: the exit code."""
        try:
            self._open()
            while self._one_line():
                pass
        except Leave as leave:
            self._screen.note(str(leave))
        if self._key is not None:
            self._screen.note(f"Continue this chat with `hearth chat --session {self._key}`.")
        return 0

    # ------------------------------------------------------------------ the start

    def _open(self) -> None:
        """Say where the prompt is; with --session, a kept chat's last messages (and its
        running turn, followed)."""
        self._api.check()
        kept = self._api.find_chat(self._name, limit=history.READ) if self._name else None
        if kept is None:
            named = f"Chat {self._name} is new" if self._name else "New chat"
            self._screen.note(f"{named}: it is kept once you send its first message. "
                              "/help lists the commands, Ctrl-D leaves.")
            return
        session = kept["session"]
        self._key, self._name = str(session["key"]), None
        if not history.show(self._screen, list(kept.get("messages", []))):
            self._screen.note("(no messages yet)")
        self._screen.note(f"Chat {self._key}: /help lists the commands, Ctrl-D leaves.")
        if kept.get("running") and kept.get("run_id"):
            self._screen.note("A turn is running; its answer follows (Ctrl-C stops it).")
            TurnFollower(self._api, self._screen, self._key, str(kept["run_id"]),
                         after=int(session.get("last_seq", 0))).follow()

    # ------------------------------------------------------------------ the prompt

    def _one_line(self) -> bool:
        """Read and act on one line: False when the person leaves."""
        try:
            line = self._screen.ask(PROMPT)
        except EOFError:
            self._screen.note("")
            return False
        except KeyboardInterrupt:
            self._screen.note("")
            return bool(typed_so_far().strip())  # a line typed is dropped; none: leave
        try:
            return self._act(line)
        except GatewayError as error:
            self._screen.note(str(error))
        except KeyboardInterrupt:  # outside a turn (a command, the chat being made)
            self._screen.note("Interrupted.")
        return True

    def _act(self, line: str) -> bool:
        text = line.strip()
        if not text:
            return True
        if text.startswith("/") and not text.startswith("//"):
            return self._command(text)
        self._say(line[line.index("/") + 1:] if text.startswith("//") else line)
        return True

    def _command(self, text: str) -> bool:
        name, _, argument = text.partition(" ")
        handler = self._handlers.get(ALIASES.get(name, name))
        if handler is None:
            self._screen.note(f"There is no command {name}. The commands are:")
            self._show(command_list())
            return True
        return handler(argument.strip())

    def _say(self, text: str) -> None:
        try:
            key = self._chat()
        except GatewayRefused as refused:
            other = " Choose another with /model NAME." if refused.code == "unknown_model" else ""
            self._screen.note(f"{refused} The message was not sent.{other}")
            return
        files, self._files = tuple(file_id for file_id, _ in self._files), []
        take_turn(self._api, self._screen, key, text, files)

    def _chat(self) -> str:
        """The chat's key, made now if the chat is not made yet."""
        if self._key is None:
            view = self._api.create_chat(self._name, self._model)
            self._key, self._name = str(view["key"]), None
        return self._key

    # ------------------------------------------------------------------ the commands

    def _help(self, _: str) -> bool:
        self._show(command_list())
        return True

    def _attach(self, argument: str) -> bool:
        """Upload a file now; it goes with the next message."""
        if not argument:
            waiting = ", ".join(name for _, name in self._files) or "none"
            self._screen.note(f"Give the file's path: /attach PATH. Waiting to be sent: "
                              f"{waiting}.")
            return True
        path = Path(argument.strip().strip("'\"")).expanduser()
        if not path.is_file():
            self._screen.note(f"There is no file at {path}.")
            return True
        try:
            view = self._api.upload(self._chat(), path)
        except GatewayRefused as refused:
            self._screen.note(f"{refused} Nothing was attached.")
            return True
        self._files.append((str(view["id"]), str(view["name"])))
        self._screen.note(f"Attached {view['name']} ({view['type']}, {view['size']:,} bytes): "
                          "it goes with your next message.")
        return True

    def _new(self, _: str) -> bool:
        self._files = []
        self._key, self._name = None, None
        self._screen.note("New chat: it is kept once you send its first message.")
        return True

    def _switch(self, key: str) -> None:
        """Talk to chat `key` from the next line (a fork)."""
        self._key, self._name = key, None

    def _stop(self, _: str) -> bool:
        stopped = self._api.stop(self._key) if self._key is not None else None
        self._screen.note("Stopped the running turn." if stopped
                          else "No turn is running in this chat.")
        return True

    def _compact(self, _: str) -> bool:
        if self._key is None:
            self._screen.note("Nothing to compact yet: this chat has no messages.")
            return True
        try:
            self._screen.note(self._api.compact(self._key))
        except GatewayRefused as refused:
            self._screen.note(str(refused))
        return True

    def _history(self, _: str) -> bool:
        kept = self._api.find_chat(self._key, limit=history.READ) if self._key else None
        if kept is None or not history.show(self._screen, list(kept.get("messages", []))):
            self._screen.note("This chat has no messages yet.")
        return True

    def _set_model(self, name: str) -> bool:
        if not name:
            self._screen.note("Give the model's name: /model NAME.")
            return True
        if self._key is not None:
            self._api.set_model(self._key, name)
            self._screen.note(f"From the next turn, this chat answers with {name}.")
        else:
            self._screen.note(f"The chat will answer with {name}.")
        self._model = name  # and so will the chats /new starts
        return True

    def _prompts(self, _: str) -> bool:
        saved = self._api.prompts()
        if not saved:
            self._screen.note("No saved prompts yet: save one as prompts/NAME.md in Hearth's "
                              "home, then start a message with @NAME.")
        for prompt in saved:
            uses = " ".join(f"{{{{{name}}}}}" for name in prompt.get("placeholders", []))
            about = " — ".join(part for part in (str(prompt.get("description", "")), uses)
                               if part)
            self._screen.note(f"  @{prompt.get('name')}" + (f"  {about}" if about else ""))
        return True

    def _show(self, lines: list[str]) -> None:
        for line in lines:
            self._screen.note(line)

