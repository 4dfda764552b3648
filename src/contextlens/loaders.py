"""Reading cases from files: JSONL, CSV or Parquet, as sessions or as test cases.

Sessions (for ``context``): JSONL with one session object per line, or flat rows (CSV,
Parquet, JSONL) with one interaction per row and ``session_id`` + ``qa_id`` columns.
Test cases (for the other metrics): one case per row. Every error names the file, the
line (or row) and the field.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from contextlens.errors import InputError
from contextlens.retriever import input_error, jsonl_objects, read_jsonl
from contextlens.schemas import Batch, Dataset, ModelTestCase

#: Column documentation, printed by ``contextlens schema`` and mirrored in the README.
SESSION_COLUMNS: dict[str, str] = {
    "session_id": "required; rows with the same id form one session",
    "assistant_id": "required; the assistant under test",
    "context": "required; the session's system context (the same on every row of a session)",
    "language": "optional, default 'english'",
    "qa_id": "required; unique within the session",
    "query": "required; the user's message",
    "assistant": "required; the assistant's reply",
    "ground_truth_assistant": "optional; the reference reply (may be empty)",
    "observation": "optional; what the assistant's tools returned",
    "weight": "optional; >= 0, the interaction's weight in the session mean",
}
CASE_COLUMNS: dict[str, str] = {
    "id": "optional; names the case in results (alias: name)",
    "input": "required; the user's question (alias: question)",
    "actual_output": "the answer under test (alias: answer, output)",
    "expected_output": "optional; the reference answer",
    "retrieval_context": "the retrieved chunks: a list (JSON array in CSV) (alias: contexts)",
    "context": "optional; ideal context chunks, a list",
}
_CASE_ALIASES = {
    "question": "input",
    "answer": "actual_output",
    "output": "actual_output",
    "contexts": "retrieval_context",
    "id": "name",
}
_LIST_FIELDS = ("retrieval_context", "context", "contexts")
_SESSION_FIELDS = ("session_id", "assistant_id", "context", "language")


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or row number, row) pairs of a CSV, Parquet or flat JSONL file."""
    suffix = path.suffix.lower()
    name = str(path)
    if suffix == ".csv":
        try:
            handle = open(path, encoding="utf-8", newline="")  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"cannot open: {exc.strerror}", file=name) from exc
        with handle:
            reader = csv.DictReader(handle)
            for row in reader:
                yield reader.line_num, {k: v for k, v in row.items() if k is not None}
    elif suffix in (".parquet", ".pq"):
        try:
            import pandas as pd
        except ImportError as exc:
            raise InputError(
                "reading Parquet needs pandas and pyarrow: pip install 'contextlens[parquet]'",
                file=name,
            ) from exc
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read Parquet: {exc}", file=name) from exc
        for index, row in enumerate(frame.to_dict(orient="records"), start=1):
            yield index, {k: _plain(v) for k, v in row.items()}
    else:
        yield from jsonl_objects(path)


def _plain(value: Any) -> Any:
    """numpy arrays and scalars from Parquet as plain Python values; NaN as None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and value != value:
        return None
    return value


def _cell(value: Any, field: str, file: str, line: int, *, lists: bool = True) -> Any:
    """A CSV cell as the type its field takes: lists from JSON arrays, blanks as absent."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if lists and field in _LIST_FIELDS:
        if not text:
            return None
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"not a JSON array: {exc.msg}", file=file, line=line, field=field
                ) from None
        return [value]
    if field == "weight":
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            raise InputError(
                f"expected a number, got {value!r}", file=file, line=line, field=field
            ) from None
    if field in ("observation",) and not text:
        return None
    return value


def _validate(model: type[BaseModel], row: Mapping[str, Any], file: str, line: int) -> Any:
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise input_error(exc, file=file, line=line) from None


def _test_case(row: dict[str, Any], file: str, line: int) -> ModelTestCase:
    mapped: dict[str, Any] = {}
    for key, value in row.items():
        target = _CASE_ALIASES.get(key, key)
        cell = _cell(value, key, file, line)
        blank = cell is None or (isinstance(cell, str) and not cell.strip())
        if target in ModelTestCase.model_fields and not blank and target not in mapped:
            mapped[target] = cell
    if mapped.get("name") is not None:
        mapped["name"] = str(mapped["name"])
    return _validate(ModelTestCase, mapped, file, line)


def _is_session_rows(columns: set[str]) -> bool:
    return {"session_id", "qa_id"} <= columns


def _sessions_from_rows(rows: Iterator[tuple[int, dict[str, Any]]], file: str) -> list[Dataset]:
    heads: dict[str, tuple[int, dict[str, Any]]] = {}
    turns: dict[str, list[Batch]] = {}
    for line, row in rows:
        cells = {k: _cell(v, k, file, line, lists=False) for k, v in row.items()}
        sid = cells.get("session_id")
        if sid in (None, ""):
            raise InputError("required", file=file, line=line, field="session_id")
        sid = str(sid)
        head = {k: cells.get(k) for k in _SESSION_FIELDS if cells.get(k) not in (None, "")}
        if sid not in heads:
            heads[sid] = (line, head)
            turns[sid] = []
        else:
            first_line, first = heads[sid]
            for key, value in head.items():
                if key in first and first[key] != value:
                    raise InputError(
                        f"differs from line {first_line} of the same session",
                        file=file,
                        line=line,
                        field=key,
                    )
        batch = {k: v for k, v in cells.items() if k in Batch.model_fields and v is not None}
        batch.setdefault("ground_truth_assistant", "")
        turns[sid].append(_validate(Batch, batch, file, line))
    sessions = []
    for sid, (line, head) in heads.items():
        sessions.append(_validate(Dataset, {**head, "conversation": turns[sid]}, file, line))
    return sessions


def load_cases(path: str | Path) -> tuple[str, Iterator[Dataset] | Iterator[ModelTestCase]]:
    """The cases of a file and their kind: ``"sessions"`` or ``"test_cases"``.

    JSONL session objects and all test cases are read lazily; flat session rows are
    grouped, which reads the whole file.
    """
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("no such file", file=name)
    rows = _rows(path)
    first = next(rows, None)
    if first is None:
        raise InputError("the file holds no rows", file=name)
    row = first[1]
    if "conversation" in row:
        rows.close()
        return "sessions", (session for _, session in read_jsonl(path, Dataset))

    def chained() -> Iterator[tuple[int, dict[str, Any]]]:
        yield first
        yield from rows

    if _is_session_rows(set(row)):
        return "sessions", iter(_sessions_from_rows(chained(), name))
    return "test_cases", (_test_case(r, name, n) for n, r in chained())
