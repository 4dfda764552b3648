"""The ``contextlens`` Typer app, the consoles it prints to, and its usage error."""

from __future__ import annotations

import typer

from contextlens.errors import ContextLensError
from contextlens.terminal import console

__all__ = ["BOLD", "RED", "UsageProblem", "app", "err", "out"]

app = typer.Typer(
    help="Measure how well an LLM assistant or a RAG pipeline uses its context.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = console()
err = console(stderr=True)
RED, BOLD = "red", "bold"


class UsageProblem(ContextLensError):
    """A mistake in the command line (exit status 2)."""
