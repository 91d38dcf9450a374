"""The JSON API: one module per route group (chats, runs, approvals, memory, jobs, apps, search,
usage, import, channels, the OpenAI-compatible API, the webhook, the live events).
"""
