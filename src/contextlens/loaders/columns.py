"""A file's columns: those it may have, the user's own (``meta``, ``meta.NAME`` /
``meta_NAME``, a pandas index) and a row split into its fields and its metadata."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import OWN_DATA, unknown_message
from contextlens.loaders.cells import blank

__all__ = ["META", "Columns", "check_keys", "split_meta", "unknown_column"]

META = OWN_DATA
_META_PREFIXES = ("meta.", "meta_")


def _meta_key(column: str) -> str | None:
    """The metadata key a flat ``meta.NAME`` / ``meta_NAME`` column stands for."""
    for prefix in _META_PREFIXES:
        if column.startswith(prefix) and len(column) > len(prefix):
            return column[len(prefix) :]
    return None


#: The name pandas gives an unnamed column it read (its index, written by ``to_csv()``).
_PANDAS_UNNAMED = re.compile(r"Unnamed: \d+")


def _own(column: str) -> bool:
    """Whether ``column`` holds the user's own data, or is a pandas index column (unnamed,
    or ``Unnamed: 0`` after a round trip through pandas): never scored."""
    return (
        not column.strip()
        or column == META
        or _meta_key(column) is not None
        or _PANDAS_UNNAMED.fullmatch(column) is not None
    )


def unknown_column(
    column: str, known: Iterable[str], *, file: str, line: int | None, where: str = ""
) -> InputError:
    """An unknown column (or key), with the closest known name when there is one."""
    what = "key" if where else "column"
    return InputError(
        unknown_message(column, known, what=what), file=file, line=line, field=where + column
    )


def check_keys(
    row: Mapping[str, Any], known: frozenset[str], file: str, line: int | None, where: str = ""
) -> None:
    for column in row:
        if column not in known and not _own(column):
            raise unknown_column(column, known - {META}, file=file, line=line, where=where)


@dataclass
class Columns:
    """Checks the columns of a file: those of each row of a JSONL file, the header of a CSV
    (line 1) or the columns of a Parquet file (no line), once."""

    known: frozenset[str]
    file: str
    each_row: bool
    header_line: int | None = None
    done: bool = False

    @classmethod
    def of(cls, path: Path, known: frozenset[str]) -> Columns:
        suffix = path.suffix.lower()
        if suffix in (".csv", ".parquet", ".pq"):
            return cls(known, str(path), False, 1 if suffix == ".csv" else None)
        return cls(known, str(path), True)

    def check(self, row: Mapping[str, Any], line: int) -> None:
        if self.each_row:
            check_keys(row, self.known, self.file, line)
        elif not self.done:
            self.done = True
            check_keys(row, self.known, self.file, self.header_line)


def split_meta(
    row: Mapping[str, Any], file: str, line: int, where: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A row's own columns and its metadata: the ``meta`` object (a JSON object in CSV)
    merged with the ``meta.NAME`` / ``meta_NAME`` columns."""
    meta: dict[str, Any] = {}
    given = row.get(META)
    if isinstance(given, str) and given.strip():
        with contextlib.suppress(json.JSONDecodeError):
            given = json.loads(given)
    if not blank(given):
        if not isinstance(given, dict):
            raise InputError(
                f"expected a JSON object, got {given!r:.60}",
                file=file,
                line=line,
                field=where + META,
            )
        meta.update(given)
    rest: dict[str, Any] = {}
    for column, value in row.items():
        key = _meta_key(column)
        if key is None:
            if not _own(column):  # neither own data nor a pandas index column
                rest[column] = value
        elif not blank(value):
            if key in meta:
                raise InputError(
                    f"the meta key {key!r} is given twice",
                    file=file,
                    line=line,
                    field=where + column,
                )
            meta[key] = value
    return rest, meta
