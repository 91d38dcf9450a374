"""Which channel adapters a gateway runs: those its configuration sets up ([channels.*]).

An adapter's library is imported only when its channel is set up (python-telegram-bot takes
a moment to import, and a gateway without Telegram never pays for it). Each library is an extra
(`hearth[telegram]`, `[slack]`, `[email]`, `[matrix]`): a channel set up without its extra is
refused here, before anything starts, with the sentence naming what to install.
"""

from __future__ import annotations

from hearth.channels.base import Channel
from hearth.config import Config
from hearth.extras import require


def build(config: Config) -> list[Channel]:
    adapters: list[Channel] = []
    if config.channels.telegram is not None:
        require("telegram")
        from hearth.channels.telegram import TelegramChannel

        adapters.append(TelegramChannel(config.channels.telegram))
    if config.channels.webhook is not None:
        from hearth.channels.webhook import WebhookChannel

        adapters.append(WebhookChannel(config.channels.webhook))
    if config.channels.slack is not None:
        require("slack")
        from hearth.channels.slack import SlackChannel

        adapters.append(SlackChannel(config.channels.slack))
    if config.channels.email is not None:
        require("email")
        from hearth.channels.mail import EmailChannel

        adapters.append(EmailChannel(config.channels.email))
    if config.channels.matrix is not None:
        require("matrix")
        from hearth.channels.matrix import MatrixChannel

        adapters.append(MatrixChannel(config.channels.matrix))
    return adapters
