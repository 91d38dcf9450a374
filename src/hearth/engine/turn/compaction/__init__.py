"""Compaction: folding the older part of a chat's model view into a summary.

`fold` is the folding itself (the compactor, the summary's chore, what a summary must be);
`in_turn` is a turn's side of it (its compactor and view, the retry after a prompt refused as
too long); `on_request` is `/compact`, a chat compacted between its turns. What the model
reads word for word is `engine.turn.context`'s to decide.
"""
