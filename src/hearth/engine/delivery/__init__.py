"""Getting what happened out: the live bus (events), and what a linked chat owes its thread
(channel_delivery)."""
