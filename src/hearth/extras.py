"""Hearth's optional integrations, pyproject's extras: what each is, the packages it imports,
and the one sentence said when one is set up without them.

A chat channel, telemetry or PostgreSQL is used only when configured, so its packages are an
extra (`pip install 'hearth[telegram]'`) and the core installs none of them. Each integration
calls `require` before it first imports its package: a missing one raises `MissingExtra`,
whose message is the sentence `hearth` prints (never a traceback). A census test holds that
no module on the gateway's start path imports an extra's package at import time.
"""

from __future__ import annotations

import importlib.util
from typing import NamedTuple


class Extra(NamedTuple):
    what: str  # what the owner set up, as the sentence names it
    modules: tuple[str, ...]  # the packages it imports (found before the first import)


EXTRAS: dict[str, Extra] = {
    "telegram": Extra("the Telegram channel is set up ([channels.telegram] in config.toml)",
                      ("telegram",)),
    "slack": Extra("the Slack channel is set up ([channels.slack] in config.toml)",
                   ("slack_sdk",)),
    "matrix": Extra("the Matrix channel is set up ([channels.matrix] in config.toml)",
                    ("nio", "aiohttp")),
    "email": Extra("the email channel is set up ([channels.email] in config.toml)",
                   ("aiosmtpd",)),
    "telemetry": Extra("traces are set up ([telemetry] otlp_endpoint in config.toml, or "
                       "OTEL_EXPORTER_OTLP_ENDPOINT)",
                       ("opentelemetry.trace", "opentelemetry.sdk",
                        "opentelemetry.exporter.otlp.proto.http")),
    "postgres": Extra("the database is PostgreSQL (HEARTH_DATABASE_URL)", ("psycopg",)),
}


class MissingExtra(RuntimeError):
    """An integration is set up, but its extra is not installed; the message says what to
    install."""

    def __init__(self, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{EXTRAS[extra].what}, but its package is not installed: run "
                         f"pip install 'hearth[{extra}]' (from a clone: make run "
                         f"EXTRAS={extra}).")


def installed(module: str) -> bool:
    """Whether `module` can be imported here (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def require(extra: str) -> None:
    """Raise MissingExtra unless every package of `extra` is installed."""
    if not all(installed(module) for module in EXTRAS[extra].modules):
        raise MissingExtra(extra)


def require_for_url(url: str) -> None:
    """A database URL's driver: PostgreSQL's is the `postgres` extra (SQLite's is Python's)."""
    if url.startswith("postgres"):
        require("postgres")


def missing_in(error: ModuleNotFoundError) -> MissingExtra | None:
    """The extra whose package `error` did not find, if it is one (an integration reached
    without `require`: the sentence still says what to install)."""
    name = error.name or ""
    for extra, needs in EXTRAS.items():
        if any(name == module or module.startswith(name + ".") or name.startswith(module + ".")
               for module in needs.modules):
            return MissingExtra(extra)
    return None
