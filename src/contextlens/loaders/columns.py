"""A file's columns: those it may have, the user's own (``meta``, ``meta.NAME`` /
``meta_NAME``, a pandas index) and a row split into its fields and its metadata."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import OWN_DATA, meta_key, unknown_message
from contextlens.loaders.cells import blank, object_cell
from contextlens.loaders.rows import RowSource

__all__ = ["META", "Columns", "check_keys", "split_meta", "unknown_column"]

META = OWN_DATA


#: The name pandas gives an unnamed column it read (its index, written by ``to_csv()``).
_PANDAS_UNNAMED = re.compile(r"Unnamed: \d+")


def _own(column: str) -> bool:
    """Whether ``column`` holds the user's own data, or is a pandas index column (unnamed,
    or ``Unnamed: 0`` after a round trip through pandas): never scored."""
    return (
        not column.strip()
        or column == META
        or meta_key(column) is not None
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
    (line 1) or the columns of a Parquet file or a DataFrame (no line), once."""

    known: frozenset[str]
    file: str
    each_row: bool
    header_line: int | None = None
    done: bool = False

    @classmethod
    def of(cls, source: RowSource, known: frozenset[str]) -> Columns:
        return cls(known, source.name, source.keys_per_row, source.header_line)

    def check(self, row: Mapping[str, Any], line: int) -> None:
        if self.each_row:
            check_keys(row, self.known, self.file, line)
        elif not self.done:
            self.done = True
            check_keys(row, self.known, self.file, self.header_line)


def split_meta(
    row: Mapping[str, Any],
    file: str,
    line: int,
    where: str = "",
    names: Collection[str] = (META,),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A row's own columns and its metadata: the ``meta`` object (under any of ``names``,
    its field's names; text read as a JSON object or a Python dict, as ``to_csv()`` writes
    one) merged with the ``meta.NAME`` / ``meta_NAME`` columns. A key given twice is an
    :class:`InputError` naming the column."""
    meta: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for name in names:
        if name not in row:
            continue
        given = object_cell(row[name], where + name, file, line)
        if given:
            for key, value in given.items():
                _add(meta, given_as, str(key), value, where + name, file, line)
    rest: dict[str, Any] = {}
    for column, value in row.items():
        key = meta_key(column)
        if key is None:
            if column not in names and not _own(column):  # no pandas index column either
                rest[column] = value
        elif not blank(value):
            _add(meta, given_as, key, value, where + column, file, line)
    return rest, meta


def _add(
    meta: dict[str, Any],
    given_as: dict[str, str],
    key: str,
    value: Any,
    column: str,
    file: str,
    line: int,
) -> None:
    if key in meta:
        raise InputError(
            f"the meta key {key!r} is given twice (also in {given_as[key]!r})",
            file=file,
            line=line,
            field=column,
        )
    meta[key] = value
    given_as[key] = column
