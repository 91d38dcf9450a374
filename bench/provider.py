"""What one model call costs Hearth in CPU, through each provider adapter on its official SDK.

The scripted model server (tests.fakes.model_server) runs in a process of its own, so every
CPU second this process spends (all its threads: `time.process_time()`) is the adapter's and
its SDK's: building and sending the request, then reading and parsing the streamed answer.
Each call is one of a turn's: a system prompt and a short history, the built-in tools
offered, an answer of a few streamed pieces with usage; one run in four answers with a tool
call instead, so the tool-call path is measured too.

Printed per adapter (openai: `OpenAICompatProvider`, anthropic: `AnthropicProvider`): CPU ms
per call, split into building and sending (to the first event) and reading the stream (from
the first event to the end), with the share of calls that answered as scripted.

Target (issue 30): the openai call measured ~4.3 ms of CPU (building and sending 1.8, parsing
chunks 0.75); lower is better, and the figure is compared before and after by running this
with PYTHONPATH pointing at another clone's src/.

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/provider.py [--calls 400] [--history 10] [--tools 12]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[len(sys.path):] = [str(ROOT), str(ROOT / "src")]  # PYTHONPATH's src/ comes first

from hearth.models.anthropic_provider import AnthropicProvider  # noqa: E402
from hearth.models.openai_compat import OpenAICompatProvider  # noqa: E402
from hearth.models.types import (  # noqa: E402
    Completed,
    Message,
    ModelRequest,
    Provider,
    ToolCall,
    ToolSpec,
)

SERVER = """
import sys, threading
sys.path[:0] = [{root!r}]
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
server = ScriptedModelServer().start()
server.default = Reply(text="Noted: the raised beds go on the south side, by the fence.",
                       chunks=6)
print(server.openai_base_url, server.anthropic_base_url, flush=True)
tool = Reply(tool_calls=[Call("read_file", {{"path": "notes/garden.md"}})])
for line in sys.stdin:  # "tool": the next call answers with a tool call
    server.push(tool)
    print("ok", flush=True)
"""


class Scripted:
    """The scripted model server in a process of its own."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER.format(root=str(ROOT))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.openai_url, self.anthropic_url = self.proc.stdout.readline().split()

    def next_is_a_tool_call(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("tool\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def request(history: int, tools: int) -> ModelRequest:
    """A turn's request: the system prompt, `history` messages (a tool step among them), the
    new message, and `tools` tools offered."""
    messages = [Message("system", "You are Hearth, a personal agent. " * 40)]
    for i in range(history // 2):
        messages.append(Message("user", f"Question {i}: where should the beds go? " * 3))
        messages.append(Message("assistant", f"Answer {i}: on the south side. " * 6))
    messages[-1:] = [Message("assistant", "", (ToolCall("c1", "read_file", {"path": "a.md"}),)),
                     Message("tool", "the file's text " * 20, tool_call_id="c1",
                             tool_name="read_file")]
    messages.append(Message("user", "And the herbs?"))
    specs = [ToolSpec(f"tool_{i}", "Does one thing, described in a sentence or two. " * 2,
                      {"type": "object", "properties": {"path": {"type": "string"},
                                                        "limit": {"type": "integer"}},
                       "required": ["path"]}) for i in range(tools)]
    return ModelRequest(messages, specs)


async def one_call(provider: Provider, asked: ModelRequest) -> tuple[float, float, bool]:
    """CPU seconds to the first event, then to the end; and whether it completed."""
    started = time.process_time()
    first: float | None = None
    completed = False
    async for event in provider.stream(asked):
        if first is None:
            first = time.process_time()
        completed = isinstance(event, Completed)
    ended = time.process_time()
    first = ended if first is None else first
    return first - started, ended - first, completed


async def measure(provider: Provider, server: Scripted, asked: ModelRequest, calls: int
                  ) -> tuple[float, float, float, float]:
    """Mean CPU ms per call (whole, sending, reading) and the share that completed."""
    for _ in range(20):  # warm: connections, imports, caches
        await one_call(provider, asked)
    sending = reading = 0.0
    done = 0
    for i in range(calls):
        if i % 4 == 3:
            server.next_is_a_tool_call()
        send, read, completed = await one_call(provider, asked)
        sending, reading, done = sending + send, reading + read, done + completed
    ms = 1000 / calls
    return (sending + reading) * ms, sending * ms, reading * ms, done / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--history", type=int, default=10)
    parser.add_argument("--tools", type=int, default=12)
    args = parser.parse_args()
    import anthropic
    import openai

    source = Path(sys.modules["hearth"].__file__ or "").parent
    print(f"Hearth bench: CPU per model call; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}; openai {openai.__version__}, anthropic "
          f"{anthropic.__version__}; hearth from {source}")
    asked = request(args.history, args.tools)
    server = Scripted()
    try:
        adapters: list[Provider] = [
            OpenAICompatProvider(model_id="bench", model_name="fake-model",
                                 base_url=server.openai_url, api_key="k"),
            AnthropicProvider(model_id="bench", model_name="fake-model",
                              base_url=server.anthropic_url, api_key="k"),
        ]
        print(f"{args.calls} calls each, {len(asked.messages)} messages and {args.tools} tools "
              "per request, one in four answered with a tool call\n")
        for provider in adapters:
            whole, sending, reading, ok = asyncio.run(
                measure(provider, server, asked, args.calls))
            print(f"  {provider.provider:<10} {whole:6.2f} ms CPU per call   "
                  f"(building and sending {sending:5.2f}, reading the stream {reading:5.2f})   "
                  f"completed {ok:.0%}")
    finally:
        server.close()
    print("\n  issue 30 measured openai at ~4.3 ms per call (building and sending 1.8, "
          "parsing chunks 0.75); lower is better")


if __name__ == "__main__":
    main()
