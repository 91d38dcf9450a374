"""`hearth chat`'s branching commands: `/regenerate`, `/variant N`, `/edit`, `/rewind N` and
`/fork N`.

A message is addressed by the number `/history` prints before it, its visible index (the
coordinate the gateway's doors speak). A command that runs a turn again follows that turn as
a sent message's is followed (`turn.TurnFollower`), then says which variant its answer is.

When running a turn again may repeat a step that already changed something, the gateway runs
nothing and answers 409 `retry_repeats_steps` with those steps and a confirm value: the steps
are shown and the owner asked, as an approval is (`[y/N]`, no by default); a yes sends the same
request again with that value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hearth.client import history
from hearth.client.api import JSON, GatewayApi, GatewayRefused
from hearth.client.terminal import Screen
from hearth.client.turn import TurnFollower

YES = ("y", "yes")
Door = Callable[[str | None], JSON]  # a request, sent with a confirm value (or none)


class Branching:
    """The branching commands of one prompt: `chat()` is its chat's key (None before the chat
    is made), `switch(key)` moves the prompt to another chat (a fork)."""

    def __init__(self, api: GatewayApi, screen: Screen, chat: Callable[[], str | None],
                 switch: Callable[[str], None]) -> None:
        self._api = api
        self._screen = screen
        self._chat = chat
        self._switch = switch

    def handlers(self) -> dict[str, Callable[[str], bool]]:
        return {"/regenerate": self.regenerate, "/variant": self.variant, "/edit": self.edit,
                "/rewind": self.rewind, "/fork": self.fork}

    # ------------------------------------------------------------------ the commands

    def regenerate(self, _: str) -> bool:
        key = self._key()
        if key is not None:
            self._run(key, lambda confirm: self._api.regenerate(key, None, confirm))
        return True

    def variant(self, argument: str) -> bool:
        key = self._key()
        wanted = _number(argument)
        if key is None:
            return True
        if wanted is None or wanted < 1:
            self._screen.note("Say which variant: /variant N, from 1 (see the number after "
                              "/regenerate, or in /history).")
            return True
        holder = _variant_holder(self._messages(key))
        if holder is None:
            return self._said("The last answer has no other variant; /regenerate makes one.")
        count = int(holder["variants"]["count"])
        if wanted > count:
            return self._said(f"The last answer has {count} variants: /variant 1 to "
                              f"/variant {count}.")
        index = int(holder["visible_index"])
        self._api.choose_variant(key, index, wanted - 1)
        messages = self._messages(key)
        chosen = next((m for m in messages if m.get("visible_index") == index), None)
        if chosen is not None:  # the chosen answer, and what followed it on its branch
            history.show(self._screen, [m for m in messages if m["index"] >= chosen["index"]])
        return True

    def edit(self, _: str) -> bool:
        key = self._key()
        if key is None:
            return True
        mine = _last(self._messages(key), "user")
        if mine is None:
            return self._said("There is no message of yours to edit in the last messages.")
        said = str(mine.get("text", ""))
        one_line = "\n" not in said
        if not one_line:
            self._screen.note(f"Your message was:\n{said}")
        self._screen.note("Type the new words (Enter sends them; an empty line keeps it as "
                          "it was).")
        try:
            text = self._screen.ask("edit> ", prefill=said if one_line else "")
        except EOFError:
            text = ""
        if not text.strip():
            return self._said("Not edited.")
        index = int(mine["visible_index"])
        self._run(key, lambda confirm: self._api.edit(key, index, text, confirm))
        return True

    def rewind(self, argument: str) -> bool:
        key = self._key()
        index = _number(argument)
        if key is None:
            return True
        if index is None:
            return self._said("Say where to: /rewind N, N the number /history shows.")
        messages = self._messages(key)
        moved = self._asked(lambda confirm: self._api.rewind(key, index, confirm))
        if moved is None:
            return True
        self._screen.note(f"Back at message {index}; what came after it is set aside (kept as "
                          "a branch).")
        if moved.get("run_id"):
            at = next((m for m in messages if m.get("visible_index") == index), {})
            self._follow(key, {"run_id": moved["run_id"], "seq": at.get("index", 0)})
        return True

    def fork(self, argument: str) -> bool:
        key = self._key()
        index = _number(argument)
        if key is None:
            return True
        if index is None:
            return self._said("Say up to where: /fork N, N the number /history shows.")
        made = self._api.fork(key, index)
        self._switch(str(made["key"]))
        self._screen.note(f"Forked messages 0 to {index} into chat {made['key']}; this prompt "
                          f"talks to it now. The chat you left is as it was: "
                          f"`hearth chat --session {key}`.")
        return True

    # ------------------------------------------------------------------ running a turn again

    def _run(self, key: str, door: Door) -> None:
        """Send `door`'s request (asking first when the gateway says it may repeat steps),
        follow the turn it starts, and say which variant its answer is."""
        admitted = self._asked(door)
        if admitted is None:
            return
        if self._follow(key, admitted) == "complete":
            self._say_variant(key, str(admitted["run_id"]))

    def _asked(self, door: Door) -> JSON | None:
        """The door's answer; when it may repeat steps, asked first (None: the owner said no)."""
        try:
            return door(None)
        except GatewayRefused as refused:
            confirm = refused.details.get("confirm")
            if refused.code != "retry_repeats_steps" or not confirm:
                raise
            if not self._confirmed(list(refused.details.get("steps") or [])):
                self._screen.note("Nothing was run again.")
                return None
            return door(str(confirm))

    def _confirmed(self, steps: list[dict[str, Any]]) -> bool:
        noun = "step" if len(steps) == 1 else "steps"
        self._screen.note(f"Running this again may repeat {len(steps)} {noun} that may already "
                          "have changed something:")
        for step in steps:
            what = " ".join(str(step[k]) for k in ("tool", "target") if step.get(k))
            receipt = f" — {step['receipt']}" if step.get("receipt") else ""
            self._screen.line(f"  · {what}{receipt}")
        try:
            return self._screen.ask("Run it again anyway? [y/N] ").strip().lower() in YES
        except EOFError:
            return False

    def _follow(self, key: str, admitted: JSON) -> str:
        return TurnFollower(self._api, self._screen, key, str(admitted["run_id"]),
                            after=int(admitted.get("seq") or 0)).follow()

    def _say_variant(self, key: str, run_id: str) -> None:
        """Which variant the turn's answer is (a regenerate), or its message (an edit)."""
        messages = [m for m in self._messages(key) if m.get("run_id") == run_id]
        answer = next((m for m in messages if m.get("kind") != "user"), {})
        asked = next((m for m in messages if m.get("kind") == "user"), {})
        for said, whose, more in ((answer, "variant", "; /variant N shows another"),
                                  (asked, "your message is variant", "")):
            variants = said.get("variants") or {}
            if int(variants.get("count", 1)) > 1:
                self._screen.note(f"({whose} {int(variants['index']) + 1} of "
                                  f"{variants['count']}{more})")
                return

    # ------------------------------------------------------------------ reading

    def _key(self) -> str | None:
        key = self._chat()
        if key is None:
            self._screen.note("This chat has no messages yet.")
        return key

    def _messages(self, key: str) -> list[JSON]:
        kept = self._api.find_chat(key, limit=history.READ)
        return list((kept or {}).get("messages", []))

    def _said(self, sentence: str) -> bool:
        self._screen.note(sentence)
        return True


def _number(argument: str) -> int | None:
    text = argument.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _last(messages: list[JSON], kind: str) -> JSON | None:
    return next((m for m in reversed(messages)
                 if m.get("kind") == kind and m.get("visible_index") is not None), None)


def _variant_holder(messages: list[JSON]) -> JSON | None:
    """The message whose variants are the last answer's: its turn's first event (a turn's later
    messages follow the first, so its siblings are the turn's other answers). None when the
    last answer has no other variant, or its variants cannot be addressed (a turn that began
    with a tool call has no message there to address them by)."""
    answer = _last(messages, "assistant")
    if answer is None:
        return None
    first = answer if answer.get("run_id") is None else next(
        m for m in messages if m.get("run_id") == answer["run_id"] and m.get("kind") != "user")
    variants = first.get("variants") or {}
    if int(variants.get("count", 1)) < 2 or first.get("visible_index") is None:
        return None
    return first
