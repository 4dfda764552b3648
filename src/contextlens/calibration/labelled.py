"""Labelled files: their rows, and the case each row stands for as a metric takes it."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contextlens.errors import InputError
from contextlens.fields import unmet_requirement
from contextlens.loaders import read_rows, test_case
from contextlens.metrics.metric import Metric
from contextlens.metrics.registry import key_of
from contextlens.schemas import Batch, Dataset, ModelTestCase

__all__ = ["LABEL_COLUMNS", "LabelledRow", "labelled_case", "lookup", "read_labelled", "session_of"]

#: The columns of a labelled file that are not the case's: the label and what it means.
LABEL_COLUMNS = ("label", "label_meaning")


@dataclass(frozen=True)
class LabelledRow:
    """One row of a labelled file: its fields (``id`` and ``label`` set), where it was."""

    line: int
    fields: dict[str, Any]
    file: str | None = None

    @property
    def id(self) -> str:
        return str(self.fields["id"])

    @property
    def label(self) -> float:
        return float(self.fields["label"])


def lookup(row: Mapping[str, Any], key: str) -> Any:
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def read_labelled(
    data: str | Path | Iterable[Mapping[str, Any]],
) -> list[LabelledRow]:
    """The rows of a labelled file (JSONL, CSV, Parquet) or of given dicts, validated:
    each has a unique ``id`` (``row-N`` when absent) and a numeric ``label``."""
    if isinstance(data, (str, Path)):
        path = Path(data)
        if not path.exists():
            raise InputError("no such file", file=str(path))
        source: Iterable[tuple[int, Mapping[str, Any]]] = read_rows(path)
        name: str | None = str(path)
    else:
        source = enumerate(data, start=1)
        name = None
    rows: list[LabelledRow] = []
    seen: dict[str, int] = {}
    for line, raw in source:
        row = dict(raw)
        label = row.get("label")
        if label is None or (isinstance(label, str) and not label.strip()):
            raise InputError(
                "required: every row needs a label", file=name, line=line, field="label"
            )
        try:
            value = float(label)
        except (TypeError, ValueError):
            raise InputError(
                f"expected a number, got {label!r}", file=name, line=line, field="label"
            ) from None
        if isinstance(label, bool) or not math.isfinite(value):
            raise InputError(
                f"expected a number, got {label!r}", file=name, line=line, field="label"
            )
        ident = row.pop("name", None) if "id" not in row else row.get("id")
        ident = f"row-{line}" if ident in (None, "") else str(ident)
        if ident in seen:
            raise InputError(
                f"duplicate id {ident!r} (first on line {seen[ident]})",
                file=name,
                line=line,
                field="id",
            )
        seen[ident] = line
        if isinstance(row.get("meta"), str) and row["meta"].strip().startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                row["meta"] = json.loads(row["meta"])
        row.update(id=ident, label=value)
        rows.append(LabelledRow(line=line, fields=row, file=name))
    if not rows:
        raise InputError("the file holds no rows", file=name)
    return rows


def session_of(case: ModelTestCase) -> Dataset:
    """A test case as a session of one interaction, as the ``context`` metric takes it: the
    session's context is the retrieved chunks joined (else the ideal ones), the reference
    reply the expected output."""
    chunks = case.retrieval_context or case.context or []
    return Dataset(
        session_id=case.name or "case",
        assistant_id="calibration",
        context="\n".join(chunks),
        conversation=[
            Batch(
                qa_id="1",
                query=case.input,
                assistant=case.actual_output or "",
                ground_truth_assistant=case.expected_output or "",
            )
        ],
        meta=case.meta,
    )


def labelled_case(row: LabelledRow, metric: Metric[Any]) -> Any:
    """The case a labelled row stands for, in the shape the metric takes. The row's fields
    are read as ``contextlens run`` reads a test case (the same names, aliases and checks),
    so a metric scores a labelled row as it scores the same row in a run; for a session
    metric the case is a session of one interaction (:func:`session_of`); a metric's own
    pydantic case type is validated from the row. A row without a field the metric requires
    is an :class:`InputError` naming the file, the line and the field, as in a run; a field
    the metric does not require may be empty (a summary has no question)."""
    fields = {k: v for k, v in row.fields.items() if k not in LABEL_COLUMNS}
    kind = metric.case_type
    if issubclass(kind, (ModelTestCase, Dataset)):
        case = test_case(fields, row.file, row.line)
        shaped = case if issubclass(kind, ModelTestCase) else session_of(case)
        unmet = unmet_requirement(shaped, metric.requires, key_of(metric))
        if unmet is not None:
            raise InputError(unmet[1], file=row.file, line=row.line, field=unmet[0])
        return shaped
    if issubclass(kind, BaseModel):
        return kind.model_validate(fields)
    raise InputError(f"calibrate cannot build a {kind.__name__} case from a labelled row")
