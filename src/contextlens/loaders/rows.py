"""The rows of a file, by its format (CSV, Parquet or flat JSONL), or of a pandas DataFrame.

A Parquet file is read as the DataFrame pandas reads from it, so a DataFrame and the
Parquet file ``to_parquet()`` writes of it give the same rows: numpy arrays and scalars as
plain lists and numbers, NaN and pandas' NA as null, a named index as a column, and no null
member in an object (Parquet stores a column of objects with every key any row has, null
where a row has none, so a null member is read as absent). A cell nested more than
:data:`~contextlens.nesting.MAX_DEPTH` deep is refused, naming the row and the column.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextlens.errors import InputError
from contextlens.nesting import deep_message, value_too_deep
from contextlens.retriever import jsonl_objects, utf8_text

__all__ = ["FRAME", "RowSource", "file_rows", "frame_rows", "is_frame", "read_rows"]

#: The longest CSV cell read (the csv module's default, 131,072 characters, would refuse a
#: text the metrics score).
_CSV_CELL_LIMIT = 2**31 - 1

#: What errors call a DataFrame given in Python, in place of a file's name.
FRAME = "DataFrame"


@dataclass
class RowSource:
    """Rows to read cases from, each with its number (a file's line or row, a DataFrame's
    position), and where they come from: ``name`` (the file, or :data:`FRAME`), whether each
    row has keys of its own (JSONL) or all share one header (``header_line``: a CSV's line
    1; None for Parquet and a DataFrame, whose columns have no line)."""

    name: str
    rows: Iterator[tuple[int, dict[str, Any]]]
    keys_per_row: bool = False
    header_line: int | None = None


def file_rows(path: Path) -> RowSource:
    """The rows of a CSV, Parquet or flat JSONL file, read lazily."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return RowSource(str(path), read_rows(path), header_line=1)
    if suffix in (".parquet", ".pq"):
        return RowSource(str(path), read_rows(path))
    return RowSource(str(path), read_rows(path), keys_per_row=True)


def read_rows(path: Path) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """(line or row number, row) pairs of a CSV, Parquet or flat JSONL file."""
    suffix = path.suffix.lower()
    name = str(path)
    if suffix == ".csv":
        csv.field_size_limit(_CSV_CELL_LIMIT)  # long texts are the metrics' to refuse, by size
        with utf8_text(path, newline="") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                extra = row.pop(None, None)
                if extra and any(str(cell).strip() for cell in extra):
                    raise InputError(
                        f"{len(extra)} more cell(s) than the header has columns",
                        file=name,
                        line=reader.line_num,
                    )
                if not any(str(cell or "").strip() for cell in row.values()):
                    continue  # a blank row (a spreadsheet's trailing ones)
                yield reader.line_num, row
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
        yield from _records(frame, name, start=1)
    else:
        yield from jsonl_objects(path)


def is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (pandas is never imported to tell: without it
    loaded, nothing is one)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def frame_rows(frame: Any) -> RowSource:
    """The rows of a pandas DataFrame, numbered by position from 0 (as ``frame.iloc``
    takes them), read as the rows of the Parquet file it would write."""
    return RowSource(FRAME, _records(frame, FRAME, start=0))


def _records(frame: Any, name: str, *, start: int) -> Iterator[tuple[int, dict[str, Any]]]:
    if any(level is not None for level in frame.index.names):
        frame = frame.reset_index()  # a named index (set_index("id")) is a column of its own
    columns = [str(c) for c in frame.columns]
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise InputError(f"the column {twice[0]!r} is given twice", file=name)
    for number, values in enumerate(frame.itertuples(index=False, name=None), start=start):
        for column, value in zip(columns, values, strict=True):
            deep = value_too_deep(value)
            if deep is not None:
                raise InputError(deep_message(), file=name, line=number, field=deep.field(column))
        yield number, {c: _plain(v) for c, v in zip(columns, values, strict=True)}


def _plain(value: Any) -> Any:
    """A DataFrame's cell as plain Python: numpy arrays as lists, numpy scalars as numbers,
    NaN and pandas' NA as None, an object without its null members."""
    if isinstance(value, dict):
        plain = {k: _plain(v) for k, v in value.items()}
        return {k: v for k, v in plain.items() if v is not None}
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    return value
