"""A 500-turn chat on a model with a 4,000-token window: does it keep answering, under the
window, at the same cost?

A real `hearth gateway` subprocess (tests.gateway.Gateway, its own temp HEARTH_HOME) talks to
the scripted fake model server (tests.fakes.model_server), whose one model is declared with
`context_window = 4000` and `max_output_tokens = 512`. The client keeps the chat's event
stream open, sends `--turns` messages one after the other (each a different question of a
few sentences; the model answers each with a paragraph) and reads each turn to its `done`.

Measured:
  * every turn completes (its `done` says complete);
  * the prompt never exceeds the window: each request the fake server recorded for a turn,
    its messages and tool specs as sent (JSON), at 3 characters a token (cautious) and at 4
    (closer to a real tokenizer for English), against the 4,000 tokens less the answer's room;
  * the cost of turns 480-500 against turns 1-20, p50: the time from send to `done`, and the
    prompt tokens sent; ratios (issue 14 asks for at most 1.2x);
  * compactions: the "Conversation compacted" notices in the transcript, and the summary
    calls the fake server saw.

A benchmark, not a test: it prints figures and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/long_chat.py [--turns 500] [--window 4000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway, write_config  # noqa: E402

OUTPUT = 512
ANSWER = ("Noted. The raised beds go on the south side, a metre apart, with the beans on the "
          "north edge so they shade nothing; water in the morning, mulch in June, and keep "
          "the paths wide enough for a barrow.")


def question(n: int) -> str:
    return (f"Question {n}: I am planning bed {n} of the garden. What should grow there, "
            f"what goes beside it, and when should I sow it if the last frost is in week "
            f"{n % 20 + 10}? The soil is clay and it gets sun until {n % 6 + 1} pm.")


class Chat:
    """One chat with its event stream held open, sending one message at a time."""

    def __init__(self, url: str) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=60)
        self.key = str(self.http.post("/api/sessions", json={}).json()["key"])
        self._stream = httpx.Client(base_url=url, headers=headers, timeout=None)
        self._response = self._stream.send(
            self._stream.build_request("GET", f"/api/sessions/{self.key}/events"), stream=True)
        self._lines = self._response.iter_lines()

    def turn(self, text: str) -> tuple[float, str]:
        """Send one message and read the stream to its run's `done`: seconds, outcome."""
        started = time.perf_counter()
        answer = self.http.post(f"/api/sessions/{self.key}/messages",
                                json={"text": text, "client_message_id": uuid.uuid4().hex})
        answer.raise_for_status()
        run_id = answer.json()["run_id"]
        for frame in self._frames():
            if frame.get("type") == "done" and frame.get("run_id") == run_id:
                return time.perf_counter() - started, str(frame.get("outcome"))
        raise RuntimeError("the event stream ended before the turn did")

    def _frames(self) -> Iterator[dict[str, object]]:
        for line in self._lines:
            if line.startswith("data:"):
                yield json.loads(line[5:])

    def notices(self) -> list[str]:
        """The chat's notices, oldest first (read a thousand messages at a time)."""
        found: list[str] = []
        params: dict[str, int] = {"limit": 1000}
        while True:
            page = self.http.get(f"/api/sessions/{self.key}", params=params).json()
            messages = page.get("messages", [])
            found[:0] = [str(m.get("text", "")) for m in messages if m.get("kind") == "notice"]
            if len(messages) < 1000:
                return found
            params["before"] = min(int(m["index"]) for m in messages)

    def close(self) -> None:
        self._response.close()
        self._stream.close()
        self.http.close()


def prompt_chars(request: Recorded) -> int:
    return len(json.dumps(request.body.get("messages", []))) + len(
        json.dumps(request.body.get("tools", [])))


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--no-tools", action="store_true",
                        help="offer the model no tools (their specs take ~2,500 tokens)")
    args = parser.parse_args()
    with ScriptedModelServer() as model:
        model.default = Reply(text=ANSWER)
        home = Path(tempfile.mkdtemp(prefix="hearth-bench-long-")) / "home"
        write_config(home, model.openai_base_url,
                     f"context_window = {args.window}\nmax_output_tokens = {OUTPUT}\n"
                     + ("tools = false\n" if args.no_tools else ""))
        gateway = Gateway(home).start()
        try:
            chat = Chat(gateway.url)
            results = [chat.turn(question(n)) for n in range(1, args.turns + 1)]
            said = chat.notices()
            chat.close()
        finally:
            gateway.stop()
        report(args, results, said, list(model.requests),
               [r for r in model.calls(chores=True) if r.chore == "summary"])


def report(args: argparse.Namespace, results: list[tuple[float, str]], said: list[str],
           turns: list[Recorded], summaries: list[Recorded]) -> None:
    """`turns`: the turns' model calls; `summaries`: the compaction summaries' (chores, which
    the scripted server records apart)."""
    limit = args.window - OUTPUT
    tokens3 = [prompt_chars(r) / 3 for r in turns]
    tokens4 = [prompt_chars(r) / 4 for r in turns]
    complete = sum(1 for _, outcome in results if outcome == "complete")
    compacted = [s for s in said if s.startswith("Conversation compacted")]
    n = len(results)
    early, late = slice(0, 20), slice(max(0, n - 21), n)
    ms = [t * 1000 for t, _ in results]
    time_ratio = p50(ms[late]) / p50(ms[early])
    token_ratio = p50(tokens3[late]) / p50(tokens3[early]) if len(tokens3) >= n else float("nan")
    print(f"long chat: {n} turns, window {args.window} tokens, answer room {OUTPUT}, "
          f"{'no tools' if args.no_tools else 'the gateway tools offered'}")
    print(f"  turns complete             {complete}/{n}"
          f"   {'ok' if complete == n else 'FAIL'}")
    print(f"  turn requests              {len(turns)}   summary calls {len(summaries)}")
    print(f"  prompt max (3 chars/token) {max(tokens3):7.0f} tokens of {limit}"
          f"   {'ok' if max(tokens3) <= limit else 'OVER'}")
    print(f"  prompt max (4 chars/token) {max(tokens4):7.0f} tokens of {limit}")
    print(f"  prompt p50 turns 1-20      {p50(tokens3[early]):7.0f} tokens   "
          f"turns {n - 20}-{n} {p50(tokens3[late]):7.0f} tokens")
    print(f"  time p50 turns 1-20        {p50(ms[early]):7.2f} ms   "
          f"turns {n - 20}-{n} {p50(ms[late]):7.2f} ms")
    print(f"  ratio late/early (time)    {time_ratio:5.2f}x   "
          f"{'ok' if time_ratio <= 1.2 else 'over 1.2x'}")
    print(f"  ratio late/early (prompt)  {token_ratio:5.2f}x")
    print(f"  compactions                {len(compacted)} notices")
    if compacted:
        print(f"  first notice               {compacted[0]}")
        print(f"  last notice                {compacted[-1]}")


if __name__ == "__main__":
    main()
