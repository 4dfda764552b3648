"""Printing for the command line: user text as text, tables that cut nothing.

Everything that comes from the user or the data (file names, case ids, metric and judge names,
reasons, error messages) reaches Rich as :class:`~rich.text.Text`, never as markup, with its
control and format characters shown escaped (``\\x1b``, ``\\n``, ``\\u202e``) and its
secrets masked (:func:`contextlens.redact.redact`), so ``[/x]`` prints as ``[/x]``, an
escape sequence cannot drive the terminal, a newline in a case id cannot forge a line of a CI
log, and a right-to-left override cannot make ``abc<RLO>gnp.exe`` read ``abcexe.png``.
Table columns of numbers and ids are never narrower than their widest value, and long text
columns fold instead of ending in an ellipsis. A table that cannot show its numbers, ids and
short texts whole in the width at hand is printed stacked: each row under its first cell, as
``header value`` pairs. Written to a file or a CI log, output is :data:`PIPE_WIDTH` wide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from contextlens.redact import redact

__all__ = ["PIPE_WIDTH", "FitTable", "console", "line", "safe", "table", "text"]

#: Width of output written to a file or a CI log (a terminal's own width is used otherwise).
PIPE_WIDTH = 160
#: A text column whose widest cell is longer than this may fold in a table, to no less than
#: :data:`FOLD_WIDTH`; a shorter one (a name, a judge, a status) is shown whole or the table
#: is stacked.
LONG_TEXT = 40
FOLD_WIDTH = 24
# C0 controls (newline and carriage return included, tab not), DEL, C1 controls; and the
# format characters that reorder or hide text: bidi embeddings, overrides and isolates, the
# zero-width characters, line and paragraph separators, the byte-order mark.
_CONTROL = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(value: Any) -> str:
    """``value`` as one line of text: its control and format characters written out
    (``\\x1b``, ``\\n``, ``\\u202e``), its secrets masked."""
    return _CONTROL.sub(_escaped, redact(str(value)))


def text(value: Any, style: str = "") -> Text:
    """User text as Rich text: shown as is, never read as markup."""
    return value if isinstance(value, Text) else Text(safe(value), style=style)


def line(*parts: Any) -> Text:
    """One line from parts: ``Text`` (styled by us) kept, anything else shown as user text."""
    return Text.assemble(*(text(p) for p in parts))


def console(*, stderr: bool = False) -> Console:
    """A console that never reads markup from plain strings printed to it; :data:`PIPE_WIDTH`
    wide when not a terminal (and ``COLUMNS`` is unset)."""
    made = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=stderr)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made.width = PIPE_WIDTH
    return made


def _width(cell: Text) -> int:
    return max((Text(part).cell_len for part in cell.plain.split("\n")), default=0)


class FitTable(Table):
    """A table that prints as a grid when its numbers, ids and short texts fit whole in
    the width at hand, and stacked otherwise: each row's first cell on its own line, then
    the row's other cells as ``header value`` pairs, as many to a line as fit."""

    def __init__(self, *args: Any, needed: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.needed = needed
        self.cells: list[list[Text]] = []

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.needed <= options.max_width:
            yield from super().__rich_console__(console, options)
            return
        if self.title is not None:
            yield text(self.title, style="bold")
        headers = [str(c.header) for c in self.columns]
        for row in self.cells:
            yield Text.assemble(row[0], style="bold", overflow="fold")
            pairs = zip(headers[1:], row[1:], strict=True)
            cells = [Text.assemble((h, "dim"), " ", v) for h, v in pairs]
            yield from _packed(cells, options.max_width)
        if self.caption is not None:
            yield text(self.caption, style="dim")


def _packed(pairs: list[Text], width: int, indent: str = "  ", gap: str = "   ") -> RenderResult:
    """``pairs`` on lines of at most ``width`` cells; a pair longer than a line is alone."""
    current = Text(indent)
    for pair in pairs:
        if current.plain.strip() and current.cell_len + len(gap) + pair.cell_len > width:
            yield current
            current = Text(indent)
        if current.plain.strip():
            current.append(gap)
        current.append_text(pair)
    if current.plain.strip():
        yield current


def table(
    title: Any,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Iterable[str] = (),
    ids: Iterable[str] = (),
    fold: Iterable[str] = (),
    caption: Any = None,
) -> FitTable:
    """A table whose cells are user text. Columns named in ``numeric`` are right-aligned;
    they, the first column and those named in ``ids`` are never wrapped nor narrower than
    their widest cell; the other columns fold long values onto more lines (those named in
    ``fold`` whatever their length, the others past :data:`LONG_TEXT`). Stacked where that
    does not fit (see :class:`FitTable`)."""
    cells = [[text(v) for v in row] for row in rows]
    numbers = set(numeric)
    whole = {*ids, *headers[:1]}
    folds = set(fold) - whole - numbers
    widths = [max([len(h), *(_width(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    needed = (
        sum(
            max(FOLD_WIDTH, len(h))
            if h in folds or (h not in numbers and h not in whole and w > LONG_TEXT)
            else w
            for h, w in zip(headers, widths, strict=True)
        )
        + 3 * len(headers)
        + 1
    )
    made = FitTable(
        title=None if title is None else text(title),
        title_justify="left",
        caption=None if caption is None else text(caption),
        needed=needed,
    )
    for i, header in enumerate(headers):
        if header in numbers:
            made.add_column(header, justify="right", no_wrap=True, min_width=widths[i])
        elif header in whole:
            made.add_column(header, no_wrap=True, min_width=widths[i])
        else:
            made.add_column(header, overflow="fold")
    for row in cells:
        made.add_row(*row)
    made.cells = cells
    return made
