"""The rows of a file, by its format: CSV, Parquet or flat JSONL."""

from __future__ import annotations

import csv
from collections.abc import Generator
from pathlib import Path
from typing import Any

from contextlens.errors import InputError
from contextlens.retriever import jsonl_objects, utf8_text

__all__ = ["read_rows"]

#: The longest CSV cell read (the csv module's default, 131,072 characters, would refuse a
#: text the metrics score).
_CSV_CELL_LIMIT = 2**31 - 1


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
        for index, row in enumerate(frame.to_dict(orient="records"), start=1):
            yield index, {str(k): _plain(v) for k, v in row.items()}
    else:
        yield from jsonl_objects(path)


def _plain(value: Any) -> Any:
    """numpy arrays and scalars from Parquet as plain Python values; NaN as None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and value != value:
        return None
    return value
