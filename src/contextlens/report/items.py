"""A run's items as a CSV file: one row per case and metric, with its status, the case's
fields and one ``meta.KEY`` column per key of the cases' ``meta``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from contextlens.files import make_folder, write_text
from contextlens.results import EvalRun, case_columns, status_of
from contextlens.schemas import ModelTestCase

__all__ = ["write_csv"]

COLUMNS = ["case_id", "metric", "score", "status", "reason", "error", "judge"]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def write_csv(run: EvalRun, path: str | Path) -> Path:
    """Write the items of ``run`` to ``path`` (UTF-8, a header row, whole, its secrets
    masked); ``status`` is ``pass`` or ``below`` (the pass mark the run set), ``failed``
    (not scored), ``not applicable`` (the metric does not apply to the case) or ``not run``
    (the run stopped before it)."""
    cases = run.cases()
    meta = sorted({k for c in cases.values() for k in c.meta})
    target = Path(path)
    make_folder(target.parent)
    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    fields_of = case_columns()
    writer.writerow(COLUMNS + fields_of + [f"meta.{k}" for k in meta])
    for item in run.iter_results():
        status = status_of(item)
        record = cases.get(item.case_id)
        case = record.case if record is not None else None
        if isinstance(case, ModelTestCase):
            fields = [_text(getattr(case, c)) for c in fields_of]
        else:  # a session: its context under the case's
            context = _text(getattr(case, "context", None))
            fields = [context if c == "context" else "" for c in fields_of]
        row_meta = record.meta if record is not None else {}
        writer.writerow(
            [
                item.case_id,
                item.metric,
                "" if item.score is None else repr(item.score),
                status,
                _text(item.reason or item.not_applicable or item.not_run),
                _text(item.error),
                _text(item.judge),
            ]
            + fields
            + [_text(row_meta.get(k)) for k in meta]
        )
    return write_text(target, handle.getvalue())
