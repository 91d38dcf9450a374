"""Search queries a query language would choke on: `HOSTILE`, operators, quotes, wildcards,
column filters, long and odd characters, for the store's search and the search API to answer
without an error (the last, a NUL, cannot be in a URL)."""

HOSTILE = ['"', "*", "NEAR(", "a OR", 'say "hello', '"unbalanced', "-", "- -", "!!! ???",
           "...", "()", "NOT", "AND OR NOT", "col:word", "^start", "word*", "*word", "'",
           "\\", "%_%", "a" * 200, "é" * 200, '"' * 200, "x " * 100, "\ue000\ue001", "\x00"]
