"""Chat channels: Telegram, a signed webhook, and the machinery they share (`manager`)."""
