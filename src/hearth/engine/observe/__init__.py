"""What the gateway says of its own work: counts for `/metrics` and `hearth status`, and
traces of turns (see each module)."""
