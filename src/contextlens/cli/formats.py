"""The files a command writes besides its report, for CI: ``--junit`` (JUnit XML: the run's
gates, failing exactly when its exit status does; ``--junit-items`` adds a test per case),
``--markdown`` (a pull request comment or ``$GITHUB_STEP_SUMMARY``, with the gates' outcome)
and ``--csv`` (the items)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from contextlens.cli.application import UsageProblem, out
from contextlens.files import OutputError, describe_os_error, make_folder, write_text
from contextlens.redact import redact
from contextlens.terminal import line

if TYPE_CHECKING:
    from contextlens.runner.gates import GateOutcome

__all__ = ["CsvOption", "JunitItemsOption", "JunitOption", "MarkdownOption", "Outputs"]

JunitOption = Annotated[
    Path | None,
    typer.Option(
        help="write a JUnit XML file: a test per gate (--fail-under, --max-failures, the cost "
        "cap), failing exactly when the exit status does, and one per metric's summary"
    ),
]
JunitItemsOption = Annotated[
    bool,
    typer.Option(
        "--junit-items",
        help="also a JUnit test per case and metric, failing below its pass mark (the file "
        "then fails where the run may pass)",
    ),
]
MarkdownOption = Annotated[
    Path | None,
    typer.Option(
        help="write the summary and the gates' outcome as Markdown (appended to "
        "$GITHUB_STEP_SUMMARY)"
    ),
]
CsvOption = Annotated[
    Path | None, typer.Option("--csv", help="write the items as CSV, with case fields and meta")
]


@dataclass(frozen=True)
class Outputs:
    """The files asked for on the command line; checked before the run, written after it."""

    junit: Path | None = None
    markdown: Path | None = None
    csv: Path | None = None
    junit_items: bool = False

    def check(self, data: Path | None = None) -> None:
        """A usage problem, before any work, for a path that names a folder, the file the
        cases are read from (``data``), or one whose folder cannot be made or written (the
        files themselves are written after the run)."""
        for option, path in (
            ("--junit", self.junit),
            ("--markdown", self.markdown),
            ("--csv", self.csv),
        ):
            if path is None:
                continue
            if path.is_dir():
                raise UsageProblem(f"{option} {path}: a folder; give a file name")
            if data is not None and _same_file(path, data):
                raise UsageProblem(
                    f"{option} {path}: the file the cases are read from; give another name"
                )
            cause = unwritable(path)
            if cause is not None:
                raise UsageProblem(f"{option} {path}: cannot be written: {cause}")
        if self.junit_items and self.junit is None:
            raise UsageProblem("--junit-items adds to the JUnit file: give --junit PATH too")

    def write(self, run: Any, outcomes: Sequence[GateOutcome] | None = None) -> None:
        """Write each file asked for, with the ``outcomes`` of the run's gates (the
        verdict's), and say where."""
        if self.csv is not None:  # first: a CSV that cannot be written stops before the
            from contextlens.report.items import write_csv  # files that tell CI it passed

            out.print(line("csv:     ", write_csv(run, self.csv)))
        if self.junit is not None:
            from contextlens.report.junit import write_junit

            written = write_junit(run, self.junit, outcomes, items=self.junit_items)
            out.print(line("junit:   ", written))
        if self.markdown is not None:
            from contextlens.report.markdown import run_markdown

            append_or_write(self.markdown, run_markdown(run, outcomes))
            out.print(line("markdown: ", self.markdown))


def _same_file(path: Path, other: Path) -> bool:
    try:
        return path.exists() and other.exists() and os.path.samefile(path, other)
    except OSError:
        return False


def unwritable(path: Path) -> str | None:
    """Why a file could not be written at ``path``, or None when it could: its folder (or
    the nearest that exists, where the rest would be made) is tried with a probe that is
    removed at once, so that a folder the file system refuses is found, not only one the
    permissions refuse. Neither the file nor a missing folder is made."""
    import tempfile

    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    try:
        if folder == path.parent:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".contextlens-probe-"):
                pass
        else:  # the folder has to be made: one must be makeable here
            os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".contextlens-probe-"))
    except OSError as exc:
        return describe_os_error(exc)
    return None


def append_or_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its secrets masked); appended when ``path`` is the step
    summary of a GitHub Actions job (``$GITHUB_STEP_SUMMARY``), which others write into too,
    else written whole."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    append = summary is not None and path.exists() and path.resolve() == Path(summary).resolve()
    if not append:
        make_folder(path.parent)
        write_text(path, text, stream=True)
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(redact(text))
    except OSError as exc:
        raise OutputError(path, describe_os_error(exc)) from None
