"""Hearth: a local-first personal AI agent gateway."""

__version__ = "0.1.0"
