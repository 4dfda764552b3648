"""The ``contextlens`` command: run, demo, schema, runs, compare, trend, calibrate.

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

import typer
from rich.text import Text

from contextlens.cli import calibrate, demo, history, run, schema, trend
from contextlens.cli.app import RED, UsageProblem, app, err
from contextlens.errors import ContextLensError
from contextlens.terminal import line

__all__ = ["UsageProblem", "app", "main"]

for command in (
    run.run,
    demo.demo,
    schema.schema,
    history.runs,
    history.compare,
    trend.trend,
    calibrate.calibrate,
):
    app.command()(command)


def main() -> None:
    """Entry point: user mistakes exit 2 with a message, never a traceback."""
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (ContextLensError, ValueError, FileNotFoundError) as exc:
        err.print(line(Text("error: ", style=RED), str(exc)))
        sys.exit(2)
    except Exception as exc:  # click's usage errors (typer may vendor click)
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):
            show()
            sys.exit(2)
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        raise
