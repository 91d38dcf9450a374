"""Getting what happened out: the live bus and the delivery ledger's steps (outbox).
"""
