"""`python -m hearth` runs the CLI."""

from hearth.cli import main

main()
