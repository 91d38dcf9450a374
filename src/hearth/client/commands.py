"""What the `hearth jobs` and `hearth apps` commands share: running one piece of work against
the gateway's API with the gateway's refusals turned into an exit code and its sentence, and
a time shown in the local zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from rich.console import Console

from hearth.client.api import GatewayApi, GatewayError, GatewayUnavailable

EXIT_REFUSED = 1
EXIT_NO_GATEWAY = 3
Api = TypeVar("Api", bound=GatewayApi)


def local(iso: str | None) -> str:
    """An ISO time as the local date and minute ("never" for none)."""
    if not iso:
        return "never"
    return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")


def run_with(api: Api, work: Callable[[Api, Console], None]) -> int:
    """Run `work(api, out)`: 0 when done; a refusal's sentence on stderr and 1, or 3 when the
    gateway cannot be reached."""
    out, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    try:
        work(api, out)
        return 0
    except GatewayError as error:
        err.print(str(error), markup=False, highlight=False)
        return EXIT_NO_GATEWAY if isinstance(error, GatewayUnavailable) else EXIT_REFUSED
    finally:
        api.close()
