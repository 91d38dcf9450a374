"""Running the `hearth` command as a user does: `hearth(...)`, `python -m hearth` in a process
of its own, on a home of the test's, with the gateway's token (or none) and nothing of this
process's HEARTH_, OPENAI_ or ANTHROPIC_ variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.gateway import TOKEN


def hearth(*args: str, home: Path, stdin: str | None = None, token: str | None = TOKEN,
           extra_env: dict[str, str] | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`hearth ARGS` run to its end on `home` (fed `stdin`); what it printed and its code."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
    env["HEARTH_HOME"] = str(home)
    if token is not None:
        env["HEARTH_TOKEN"] = token
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "hearth", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)
