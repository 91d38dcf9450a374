"""Privacy: memory modes, the one reader of a session's mode, and the work scope that carries
it into every task and thread."""
