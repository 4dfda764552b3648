"""``python -m contextlens``."""

from contextlens.cli import main

main()
