"""``python -m toolproof``: the command line."""

from toolproof.adapters.cli import main

main()
