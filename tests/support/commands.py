"""Shell commands that look like reads and write: what the read-only placement must never take
for a read (tests/tools: the command hardening tests and the placement census)."""

# Each passes the screen (it looks like a reader) and writes `pwned` when run writable.
DISGUISED_WRITERS = [
    "LESSOPEN='touch pwned %s' less notes.txt",  # a variable that makes a program run another
    "sort --outp=pwned notes.txt",  # an abbreviated long option that writes a file
    "GIT_EXTERNAL_DIFF='touch pwned' git diff",  # a VCS helper calling an external program
]
