"""Every thread and thread pool Hearth makes, each carrying its submitter's context.

Work keeps the contextvars of whoever handed it over (the privacy scope among them: a
restricted chat's work must never run as nobody's). A plain `ThreadPoolExecutor` or `Thread`
does not carry them, so this is the one module allowed to make either; a census test forbids
them anywhere else.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class ContextCarryingExecutor(ThreadPoolExecutor):
    """A thread pool that runs each job in a copy of the submitter's context."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)  # type: ignore[arg-type]


def start_daemon(target: Callable[[], Any], name: str) -> threading.Thread:
    """A daemon thread for a long-lived owner (the store's writer), started in a copy of the
    starter's context. The jobs it runs carry their own submitters' contexts."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
    thread.start()
    return thread
