"""Printing for the command line: user text as text, tables that cut nothing.

Everything that comes from the user or the data (file names, case ids, metric and judge names,
reasons, error messages) reaches Rich as :class:`~rich.text.Text`, never as markup, with its
control and format characters shown escaped (``\\x1b``, ``\\n``, ``\\u202e``) and its
secrets masked (:func:`contextlens.redact.redact`), so ``[/x]`` prints as ``[/x]``, an
escape sequence cannot drive the terminal, a newline in a case id cannot forge a line of a CI
log, and a right-to-left override cannot make ``abc<RLO>gnp.exe`` read ``abcexe.png``.
Table columns of numbers are never narrower than their widest value, and text columns fold
instead of ending in an ellipsis; written to a file or a CI log, output is :data:`PIPE_WIDTH`
wide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from contextlens.redact import redact

__all__ = ["PIPE_WIDTH", "console", "line", "safe", "table", "text"]

#: Width of output written to a file or a CI log (a terminal's own width is used otherwise).
PIPE_WIDTH = 160
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


def table(
    title: Any,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Iterable[str] = (),
    caption: Any = None,
) -> Table:
    """A table whose cells are user text. Columns named in ``numeric`` are right-aligned and
    never narrower than their widest cell; the others fold long values onto more lines."""
    cells = [[text(v) for v in row] for row in rows]
    numbers = set(numeric)
    made = Table(
        title=None if title is None else text(title),
        title_justify="left",
        caption=None if caption is None else text(caption),
    )
    for i, header in enumerate(headers):
        if header in numbers:
            widest = max((c[i].cell_len for c in cells), default=0)
            made.add_column(
                header, justify="right", no_wrap=True, min_width=max(widest, len(header))
            )
        else:
            made.add_column(header, overflow="fold")
    for row in cells:
        made.add_row(*row)
    return made
