"""A run's items as a CSV file: one row per case and metric, with its status, the case's
fields and one ``meta.KEY`` column per key of the cases' ``meta``.

Each cell is masked (:func:`contextlens.redact.redact`) before it is written, never the
file's text, and a cell that a spreadsheet would run as a formula is neutralised as OWASP
recommends for CSV injection: a cell beginning with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return gets a single quote in front (``=HYPERLINK(...)`` is written
``'=HYPERLINK(...)``), so a spreadsheet reads it as text and runs nothing. A cell that is a
number (a negative score, ``-3`` in ``meta``) is written as it is.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from pathlib import Path
from typing import Any

from contextlens.files import make_folder, write_text
from contextlens.redact import Redactor
from contextlens.results import EvalRun, case_columns, status_of
from contextlens.schemas import ModelTestCase

__all__ = ["write_csv"]

COLUMNS = ["case_id", "metric", "score", "status", "reason", "error", "judge"]
#: The first characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _text(value: Any, mask: Redactor) -> str:
    """A value as the text of its cell, its secrets masked: a string as it is, a list or a
    mapping (retrieved chunks, a ``meta`` value) as JSON of its masked strings."""
    if value is None:
        return ""
    if isinstance(value, str):
        return mask.text(value)
    return json.dumps(mask.value(value), ensure_ascii=False)


def cell(text: str) -> str:
    """``text`` as a CSV cell: a single quote in front when a spreadsheet would read it as a
    formula (it begins with one of :data:`FORMULA_START`) and it is not a number."""
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def write_csv(run: EvalRun, path: str | Path) -> Path:
    """Write the items of ``run`` to ``path`` (UTF-8, a header row, whole; each cell masked
    and kept from running as a formula, as the module says); ``status`` is ``pass`` or
    ``below`` (the pass mark the run set), ``failed`` (not scored), ``not applicable`` (the
    metric does not apply to the case) or ``not run`` (the run stopped before it)."""
    cases = run.cases()
    text = functools.partial(_text, mask=Redactor())  # the environment read once
    meta = sorted({k for c in cases.values() for k in c.meta})
    target = Path(path)
    make_folder(target.parent)
    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    fields_of = case_columns()
    header = COLUMNS + fields_of + [f"meta.{k}" for k in meta]
    writer.writerow([cell(text(c)) for c in header])
    for item in run.iter_results():
        status = status_of(item)
        record = cases.get(item.case_id)
        case = record.case if record is not None else None
        if isinstance(case, ModelTestCase):
            fields = [text(getattr(case, c)) for c in fields_of]
        else:  # a session: its context under the case's
            context = text(getattr(case, "context", None))
            fields = [context if c == "context" else "" for c in fields_of]
        row_meta = record.meta if record is not None else {}
        row = (
            [
                text(item.case_id),
                text(item.metric),
                "" if item.score is None else repr(item.score),
                status,
                text(item.reason or item.not_applicable or item.not_run),
                text(item.error),
                text(item.judge),
            ]
            + fields
            + [text(row_meta.get(k)) for k in meta]
        )
        writer.writerow([cell(c) for c in row])
    return write_text(target, handle.getvalue(), mask=False, stream=True)
