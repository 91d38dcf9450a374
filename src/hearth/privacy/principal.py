"""On whose behalf work runs: the principal (the owner, an app, a channel guest).

A principal is fixed once, where a request is authenticated (the gateway's token or the
signed-in dashboard is the owner; an app's token is that app; a channel's sender is the owner
when listed in `owner_ids`, a guest otherwise), stored with the run at admission
(`runs.principal`) and with a job (`jobs.principal`), and inherited by whatever derives from
the work (a helper, a job, a fork, a retry, a steer). Everything else reads it; nothing
decides "owner" anew. A chat an app started narrows whatever is sent into it to that app
(`within`): an app's chat never runs on the owner's trust.

Stored as text: `owner`, `app:<name>`, `guest:<channel>:<user>`. A stored value this module
cannot read is a guest of nowhere (`UNKNOWN`): it fails closed, never to the owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["owner", "app", "guest"]


@dataclass(frozen=True)
class Principal:
    """Who the work is for: `kind`, and the app's name or the guest's `channel:user`."""

    kind: Kind
    name: str = ""

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"

    @property
    def app(self) -> str | None:
        """The app's name, for an app's work; None otherwise."""
        return self.name if self.kind == "app" else None

    def encode(self) -> str:
        return "owner" if self.kind == "owner" else f"{self.kind}:{self.name}"

    def shown(self) -> str:
        """Who it is, as an approval card or the audit says it: "you", "app Zapier",
        "guest 42 on telegram"."""
        if self.kind == "owner":
            return "you"
        if self.kind == "app":
            return f"app {self.name}"
        channel, _, user = self.name.partition(":")
        return f"guest {user or '?'} on {channel or 'a channel'}"

    def within(self, created_by_app: str | None) -> Principal:
        """This principal's work in a chat `created_by_app` started: that app's, unless it
        is narrower already (a guest stays a guest)."""
        if created_by_app is None or self.kind != "owner":
            return self
        return app(created_by_app)


OWNER = Principal("owner")  # only the places that authenticate say this (a census holds it)
UNKNOWN = Principal("guest", "unknown:unknown")


def app(name: str) -> Principal:
    return Principal("app", name)


def guest(channel: str, user: str) -> Principal:
    return Principal("guest", f"{channel}:{user}")


def decode(raw: object) -> Principal:
    """The principal a stored value says; one it cannot read is `UNKNOWN` (never the owner)."""
    if raw == "owner":
        return OWNER
    if not isinstance(raw, str):
        return UNKNOWN
    kind, sep, name = raw.partition(":")
    if not sep or not name:
        return UNKNOWN
    if kind == "app":
        return app(name)
    if kind == "guest" and ":" in name:
        return Principal("guest", name)
    return UNKNOWN
