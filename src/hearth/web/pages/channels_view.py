"""What the dashboard's pages show of the chat channels: where a chat answers (its badge and
its menu's "Continue on …" items) and each channel's health (Settings → Channels).

The channels are the gateway's (`request.app.state.channels`, started by `web.app`); the routes
that move a chat are `web.api.channels`'s, which the page's script calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from hearth.channels.manager import Channels
from hearth.engine.delivery import channel_delivery
from hearth.engine.runtime import Engine


@dataclass(frozen=True)
class ChannelRow:
    """A configured channel as a page shows it."""

    name: str
    title: str  # "Telegram"
    state: str  # starting | running | error
    sentence: str
    can_continue: bool  # it knows the owner's own chat, so a chat can be moved there
    hint: str | None = None  # why not, when the channel says (else: set owner_ids)
    own: str = "your DM"  # what the owner's own thread there is called


OWN_WORDS = {"email": "your mail"}  # the owner's own thread, where "your DM" is not the word


def shown(name: str) -> str:
    """A channel's name as the pages say it ("telegram" → "Telegram")."""
    return name.title()


def own_word(name: str) -> str:
    """What the badge calls the owner's own thread on the channel ("Answers on Telegram ·
    your DM", "Answers on Email · your mail")."""
    return OWN_WORDS.get(name, "your DM")


def _channels(request: Request) -> Channels | None:
    channels: Channels | None = getattr(request.app.state, "channels", None)
    return channels


def rows(request: Request) -> list[ChannelRow]:
    """Every configured channel, in the configuration's order."""
    channels = _channels(request)
    if channels is None:
        return []
    return [ChannelRow(name, shown(name), health["state"], health["sentence"],
                       channels.adapters[name].owner_thread() is not None,
                       getattr(channels.adapters[name], "continue_hint", None), own_word(name))
            for name, health in channels.health().items()]


async def link_of(engine: Engine, key: str) -> dict[str, Any] | None:
    """Where the chat answers besides the dashboard: `{channel, title, thread, owner_dm}`, or
    None when it answers here only."""
    view = channel_delivery.link_view(await channel_delivery.link_of(engine, key))
    if view is None:
        return None
    return {**view, "title": shown(str(view["channel"])), "own": own_word(str(view["channel"]))}
