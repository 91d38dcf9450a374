"""What the compaction tests share (the engine's, tests/engine/test_compaction.py, and the API's,
tests/web/test_compaction_api.py): a small window for the chat model (`WINDOW`, `OUTPUT`) so a
few exchanges fill it, the owner's questions and the model's answers (`ask`, `answer`), and
the turns' own requests among what the model server received (`turn_requests`)."""

from __future__ import annotations

from tests.fakes.model_server import Recorded, ScriptedModelServer

WINDOW = 4000  # tokens: a small window, so that a few exchanges fill it
OUTPUT = 512


def ask(n: int) -> str:
    return f"Question {n}: where should bed {n} go, and what grows well beside it? " + (
        "Some detail about the soil and the light. " * 5)


def answer(n: int) -> str:
    return f"Answer {n}: bed {n} goes by the south wall. " + ("More advice on spacing. " * 8)


def turn_requests(server: ScriptedModelServer) -> list[Recorded]:
    """The requests of the chat model's turns (a summary's request left out)."""
    return [r for r in server.requests if r.model == "fake-model"
            and not str(r.messages[0]["content"]).startswith("You compact a conversation")]
