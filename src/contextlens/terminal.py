"""Printing for the command line: user text as text, tables that cut nothing.

Everything that comes from the user or the data (file names, case ids, metric and judge names,
reasons, error messages) reaches Rich as :class:`~rich.text.Text`, never as markup, with its
control and format characters shown escaped (``\\x1b``, ``\\n``, ``\\u202e``) and its
secrets masked (:func:`contextlens.redact.redact`), so ``[/x]`` prints as ``[/x]``, an
escape sequence cannot drive the terminal, a newline in a case id cannot forge a line of a CI
log, and a right-to-left override cannot make ``abc<RLO>gnp.exe`` read ``abcexe.png``.
Table columns of numbers and ids are never narrower than their widest value, and long text
columns fold instead of ending in an ellipsis. A table that cannot show its numbers, ids and
short texts whole in the width at hand is printed in its narrower form when it has one (a
``fallback`` table), else stacked: each row under its first cell, as ``header value`` pairs.
A column named ``shared`` that holds one value in every row of a table of two rows or more is
said once under the table instead. Written to a file or a CI log, output is
:data:`PIPE_WIDTH` wide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
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
# zero-width characters, line and paragraph separators, the byte-order mark; the
# noncharacters U+FFFE and U+FFFF, which no text holds.
_CONTROL = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufffe\uffff]"
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
    the width at hand; otherwise as its ``fallback`` (a narrower table of the same data)
    when it has one, else stacked: each row's first cell on its own line, then the row's
    other cells as ``header value`` pairs, as many to a line as fit."""

    def __init__(self, *args: Any, needed: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.needed = needed
        self.cells: list[list[Text]] = []
        self.fallback: FitTable | None = None

    def fits(self, width: int) -> bool:
        """Whether the grid shows every number, id and short text whole in ``width``."""
        return self.needed <= width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.fits(options.max_width):
            yield from super().__rich_console__(console, options)
            return
        if self.fallback is not None:
            yield self.fallback
            return
        if self.title is not None:
            yield text(self.title, style="bold")
        headers = [str(c.header) for c in self.columns]
        for row in self.cells:
            yield Text.assemble(row[0], style="bold", overflow="fold")
            pairs = zip(headers[1:], row[1:], strict=True)
            cells = [Text.assemble((h, "dim"), " ", _one_line(v)) for h, v in pairs]
            yield from _packed(cells, options.max_width)
        if self.caption is not None:
            yield text(self.caption, style="dim")


def _one_line(cell: Text) -> Text:
    """A cell of several lines (a run's tags, its means) as one: ``a, b``."""
    return Text(", ").join(cell.split("\n")) if "\n" in cell.plain else cell


def _packed(pairs: list[Text], width: int, indent: int = 2, gap: str = "   ") -> RenderResult:
    """``pairs`` on lines of at most ``width`` cells, ``indent`` in; a pair longer than a
    line is alone, wrapped at the same indent."""
    room = max(1, width - indent)
    current = Text()
    for pair in pairs:
        if current.plain and current.cell_len + len(gap) + pair.cell_len > room:
            yield Padding(current, (0, 0, 0, indent), expand=False)
            current = Text()
        if current.plain:
            current.append(gap)
        current.append_text(pair)
    if current.plain:
        yield Padding(current, (0, 0, 0, indent), expand=False)


def table(
    title: Any,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Iterable[str] = (),
    ids: Iterable[str] = (),
    fold: Iterable[str] = (),
    shared: Iterable[str] = (),
    caption: Any = None,
) -> FitTable:
    """A table whose cells are user text. Columns named in ``numeric`` are right-aligned;
    they, the first column and those named in ``ids`` are never wrapped nor narrower than
    their widest cell; the other columns fold long values onto more lines (those named in
    ``fold`` whatever their length, the others past :data:`LONG_TEXT`). A column named in
    ``shared`` with one value in every row (of two rows or more) is left out and said at the
    head of the caption (``judge offline``; nothing for ``-``). Stacked where that does not
    fit (see :class:`FitTable`)."""
    headers = list(headers)
    cells = [[text(v) for v in row] for row in rows]
    said: list[str] = []
    for name in shared:
        i = headers.index(name)
        values = {c[i].plain for c in cells}
        if len(cells) < 2 or len(values) != 1:
            continue
        (value,) = values
        if value not in ("", "-"):
            said.append(f"{name} {value.replace(chr(10), ', ')}")
        del headers[i]
        for c in cells:
            del c[i]
    if said:
        below = () if caption is None else (Text("\n"), caption)
        caption = line("; ".join(said), *below)
    numbers = set(numeric) & set(headers)
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
        caption_justify="left",
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
