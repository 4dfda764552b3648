"""The ``contextlens`` Typer app, the consoles it prints to, and its usage error."""

from __future__ import annotations

import os
import signal
import threading
import warnings

import typer
from rich.text import Text

from contextlens.errors import ContextLensError
from contextlens.sync import interrupt
from contextlens.terminal import console, line

__all__ = [
    "BOLD",
    "RED",
    "UsageProblem",
    "app",
    "err",
    "handle_termination",
    "out",
    "show_warnings_as_lines",
    "stop_signal",
    "was_terminated",
]

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


_terminated = False


def stop_signal() -> str:
    """What stopped the command: ``SIGTERM`` or ``the user`` (Ctrl-C)."""
    return "SIGTERM" if _terminated else "the user"


def was_terminated() -> bool:
    """Whether SIGTERM stopped the command (exit status 143 then, 130 for Ctrl-C)."""
    return _terminated


def handle_termination() -> None:
    """Take SIGTERM (docker stop, a CI cancel, a Kubernetes eviction) as Ctrl-C is taken:
    stop sending, let what is in flight end and be written, record the run interrupted with
    the command that resumes it. It is handled on its own, not turned into SIGINT, which a
    process started in the background by a script (``cmd &``), under nohup or by many CI
    runners ignores. A second SIGTERM stops at once."""

    def on_term(signum: int, frame: object) -> None:
        global _terminated
        again, _terminated = _terminated, True
        if again or not interrupt():  # no run under way: stop where the command is
            raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)


def show_warnings_as_lines() -> None:
    """Print contextlens's warnings as ``warning:`` (``note:`` for a user warning) lines on
    stderr, as text, instead of Python's file-and-line form; other libraries' warnings are
    left out of the command's output."""
    package = f"{os.sep}contextlens{os.sep}"

    def show(message: Warning | str, category: type[Warning], filename: str, *args: object) -> None:
        if package not in str(filename):
            return
        label = "note" if issubclass(category, UserWarning) else "warning"
        err.print(line(Text(f"{label}: ", style="yellow"), str(message)))

    warnings.showwarning = show  # type: ignore[assignment]
