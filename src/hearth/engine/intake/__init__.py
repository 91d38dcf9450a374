"""How a message comes in: admission (the one durable write that acknowledges), a new chat's first
message, a channel's message, an OpenAI-compatible request, @mentions.
"""
