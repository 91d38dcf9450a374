"""The gateway's own clients: `hearth chat` (chat.py) and `hearth mcp` (mcp.py), and the one
reader of the gateway's error envelope they share (envelope.py).

They speak only the public HTTP API, like any other client, and import nothing of the server
(an import-linter contract in pyproject.toml holds it): a client that reached into the store or
the engine would work only on the machine the gateway runs on, and would bypass its rules.
"""
