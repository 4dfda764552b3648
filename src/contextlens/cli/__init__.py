"""The ``contextlens`` command: run, demo, schema, runs, compare, trend, calibrate, batches.

One module per command (:mod:`~contextlens.cli.run`, :mod:`~contextlens.cli.calibrate`,
:mod:`~contextlens.cli.history`, :mod:`~contextlens.cli.trend`, :mod:`~contextlens.cli.schema`,
:mod:`~contextlens.cli.demo`); what they share is in :mod:`~contextlens.cli.options` (and the
files for CI in :mod:`~contextlens.cli.formats`).

Exit status: 0 ok; 1 a ``--fail-under`` threshold missed; 2 bad input or usage (with a
message naming the file, line and field; never a traceback for a user mistake); 3 more items
failed than ``--max-failures`` allows (none by default). When both 1 and 3 apply, 3.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.text import Text

from contextlens.cli import batches, calibrate, demo, history, run, schema, trend
from contextlens.cli.application import (
    RED,
    UsageProblem,
    app,
    err,
    handle_termination,
    out,
    show_warnings_as_lines,
    stop_signal,
    was_terminated,
)
from contextlens.errors import ContextLensError
from contextlens.files import describe_os_error
from contextlens.terminal import line

__all__ = ["UsageProblem", "app", "main"]


def _version(shown: bool) -> None:
    if shown:
        from contextlens import __version__

        out.print(f"contextlens {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version, help="print the version"),
    ] = False,
) -> None:
    """Measure how well an LLM assistant or a RAG pipeline uses its context."""


for command in (
    run.run,
    demo.demo,
    schema.schema,
    history.runs,
    history.compare,
    trend.trend,
    calibrate.calibrate,
    batches.batches,
):
    app.command()(command)


def main() -> None:
    """Entry point: user mistakes exit 2 with a message, never a traceback; Ctrl-C exits 130
    and SIGTERM 143, each with the run recorded as interrupted."""
    handle_termination()
    show_warnings_as_lines()
    try:
        code = app(standalone_mode=False)
        if code == 130:  # click reports an interrupt as status 130
            _stopped()
        if isinstance(code, int) and code:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (ContextLensError, ValueError, FileNotFoundError) as exc:
        err.print(line(Text("error: ", style=RED), str(exc)))
        sys.exit(2)
    except OSError as exc:  # a path the command cannot read or write
        where = f"{exc.filename}: " if exc.filename else ""
        err.print(line(Text("error: ", style=RED), where, describe_os_error(exc)))
        sys.exit(2)
    except KeyboardInterrupt:
        _stopped()
    except Exception as exc:  # click's usage errors (typer may vendor click)
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):
            show()
            sys.exit(2)
        if type(exc).__name__ == "Abort":
            _stopped()
        raise


def _stopped() -> None:
    """Stopped by Ctrl-C (exit 130) or SIGTERM (exit 143)."""
    err.print(line(Text("stopped ", style=RED), f"by {stop_signal()}"))
    sys.exit(143 if was_terminated() else 130)
