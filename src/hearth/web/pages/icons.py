"""The dashboard's icons: inline SVG line drawings in the text's colour. Each is decorative
(`aria-hidden`): the control carrying one says what it does in words or an aria-label."""

from __future__ import annotations

from markupsafe import Markup

PATHS = {
    "flame": (
        "M12 3c1 3.5 5 5.5 5 10a5 5 0 0 1-10 0c0-2.2 1-3.7 2.2-4.8.1 1.6.8 2.8 2 3.3C11 9"
        " 11.3 5.8 12 3z"
    ),
    "plus": ("M12 5v14M5 12h14"),
    "menu": ("M4 6h16M4 12h16M4 18h16"),
    "close": ("M6 6l12 12M18 6L6 18"),
    "search": ("M11 18a7 7 0 1 1 0-14 7 7 0 0 1 0 14zM20 20l-4-4"),
    "send": ("M12 19V5M6 11l6-6 6 6"),
    "stop": ("M7 7h10v10H7z"),
    "paperclip": (
        "M21 11.5l-8.6 8.6a5 5 0 0 1-7.1-7.1l8.6-8.6a3.3 3.3 0 0 1 4.7 4.7l-8.6 8.6a1.7 1.7 0 0 "
        "1-2.4-2.4l7.9-7.9"
    ),
    "file": ("M14 3H6v18h12V7zM14 3v4h4"),
    "mic": ("M12 3a3 3 0 0 0-3 3v6a3 3 0 0 0 6 0V6a3 3 0 0 0-3-3zM5 11a7 7 0 0 0 14 0M12 18v3"),
    "copy": ("M9 9h10v10H9zM5 15V5h10"),
    "check": ("M5 12l5 5 9-10"),
    "sun": (
        "M12 17a5 5 0 1 0 0-10 5 5 0 0 0 0 10zM12 1v2M12 21v2M4.2 4.2l1.4 1.4M18.4 18.4l1"
        ".4 1.4M1 12h2M21 12h2M4.2 19.8l1.4-1.4M18.4 5.6l1.4-1.4"
    ),
    "moon": ("M21 13A9 9 0 1 1 11 3a7 7 0 0 0 10 10z"),
    "monitor": ("M3 4h18v12H3zM8 20h8M12 16v4"),
    "more": ("M5 12h.01M12 12h.01M19 12h.01"),
    "shield": ("M12 3l8 3v6c0 5-3.5 8-8 9-4.5-1-8-4-8-9V6z"),
    "memory": ("M4 5h16v14H4zM8 9h8M8 13h5"),
    "chart": ("M4 20V10M10 20V4M16 20v-7M22 20H2"),
    "gear": (
        "M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM19.4 15a1.7 1.7 0 0 0 .3 1.8l.1.1a2 2 0 1 1-"
        "2.8 2.8l-.1-.1a1.7 1.7 0 0 0-1.8-.3 1.7 1.7 0 0 0-1 1.5V21a2 2 0 1 1-4 0v-.1a1.7"
        " 1.7 0 0 0-1.1-1.5 1.7 1.7 0 0 0-1.8.3l-.1.1a2 2 0 1 1-2.8-2.8l.1-.1a1.7 1.7 0 0"
        " 0 .3-1.8 1.7 1.7 0 0 0-1.5-1H3a2 2 0 1 1 0-4h.1a1.7 1.7 0 0 0 1.5-1.1 1.7 1.7 0"
        " 0 0-.3-1.8l-.1-.1a2 2 0 1 1 2.8-2.8l.1.1a1.7 1.7 0 0 0 1.8.3H9a1.7 1.7 0 0 0 1-"
        "1.5V3a2 2 0 1 1 4 0v.1a1.7 1.7 0 0 0 1 1.5 1.7 1.7 0 0 0 1.8-.3l.1-.1a2 2 0 1 1 "
        "2.8 2.8l-.1.1a1.7 1.7 0 0 0-.3 1.8V9a1.7 1.7 0 0 0 1.5 1H21a2 2 0 1 1 0 4h-.1a1."
        "7 1.7 0 0 0-1.5 1z"
    ),
    "key": ("M15 7a4 4 0 1 1-3.9 5H3v3h3v3h3v-3h2.1A4 4 0 0 1 15 7z"),
    "list": ("M8 6h12M8 12h12M8 18h12M4 6h.01M4 12h.01M4 18h.01"),
    "inbox": ("M3 13h5l1.5 3h5l1.5-3h5M5.5 5h13L21 13v6H3v-6z"),
    "eye-off": (
        "M3 3l18 18M10.6 10.6a2 2 0 0 0 2.8 2.8M9.9 5.1A9.8 9.8 0 0 1 12 5c5 0 9 4.5 10 7"
        "a13 13 0 0 1-3 4.2M6.6 6.6C4.4 8 2.8 10.1 2 12c1 2.5 5 7 10 7 1.7 0 3.3-.5 4.6-1"
        ".3"
    ),
    "clock": ("M12 21a9 9 0 1 0 0-18 9 9 0 0 0 0 18zM12 7v5l3 2"),
    "down": ("M12 5v14M6 13l6 6 6-6"),
    "logout": ("M15 4h4v16h-4M10 8l-4 4 4 4M6 12h10"),
    "sidebar": ("M3 4h18v16H3zM9 4v16"),
    "incognito": (
        "M2 11h20M5 11l1.6-6h10.8L19 11M4 16.5a3 3 0 1 0 6 0 3 3 0 1 0-6 0M14 16.5a3 3 0 1 0 6"
        " 0 3 3 0 1 0-6 0M10 16.5c.8-.7 3.2-.7 4 0"
    ),
    "hourglass": ("M6 3h12M6 21h12M7 3c0 5 5 6 5 9s-5 4-5 9M17 3c0 5-5 6-5 9s5 4 5 9"),
    "folder": ("M3 6.5A1.5 1.5 0 0 1 4.5 5H9l2 2.5h8.5A1.5 1.5 0 0 1 21 9v9.5a1.5 1.5 0 0 1-1.5"
               " 1.5h-15A1.5 1.5 0 0 1 3 18.5z"),
    "pin": ("M9 4h6M10 4v6l-3 4h10l-3-4V4M12 14v6"),
    "pencil": ("M4 20h4L19 9l-4-4L4 16zM13.5 6.5l4 4"),
    "tag": ("M3 12V4h8l9 9-8 8zM7.5 8.5h.01"),
    "archive": ("M3 4h18v4H3zM5 8v12h14V8M10 12h4"),
    "trash": ("M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3"),
    "tool": (
        "M14.7 6.3a4 4 0 0 0-5.4 5.4L3 18l3 3 6.3-6.3a4 4 0 0 0 5.4-5.4l-2.5 2.5-2.5-.5-.5-2.5z"
    ),
}


def icon(name: str, cls: str = "icon") -> Markup:
    """An icon by name (a KeyError for a name not drawn here: a template bug, not input)."""
    return Markup(
        f'<svg class="{cls}" viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" '
        'focusable="false" fill="none" stroke="currentColor" stroke-width="1.8" '
        f'stroke-linecap="round" stroke-linejoin="round"><path d="{PATHS[name]}"/></svg>'
    )
