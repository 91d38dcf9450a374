"""What is done to a whole chat: the doors that branch it (and the repeat guard they ask), its
map, deletion, export and import (JSON Lines), memory edits, search.
"""
