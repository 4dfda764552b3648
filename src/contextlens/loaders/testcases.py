"""Rows as test cases: one case per row (a file's, a DataFrame's, a dict given in Python), its
columns read through the field table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import TEST_CASE_FIELDS
from contextlens.loaders.cells import blank, first_time, typed_cell, validate, why_absent
from contextlens.loaders.columns import META, Columns, split_meta, unknown_column
from contextlens.loaders.rows import RowSource
from contextlens.schemas import ModelTestCase

__all__ = ["numbered_test_cases", "test_case"]

_CASE_KEYS = TEST_CASE_FIELDS.names
#: The names the ``meta`` object goes by (DeepEval's ``additional_metadata`` among them).
_META_NAMES = frozenset(n for n in _CASE_KEYS if TEST_CASE_FIELDS.canonical(n) == META)


def test_case(row: Mapping[str, Any], file: str | None, line: int) -> ModelTestCase:
    """One row (its columns read through the field table) as a test case; errors name the
    file, the line and the column.

    Each cell is read as its field's type (:func:`~contextlens.loaders.cells.typed_cell`);
    the user's own data is the ``meta`` object (or ``additional_metadata`` / ``metadata``)
    merged with the ``meta.NAME`` / ``meta_NAME`` columns."""
    file = file or "<rows>"
    own, meta = split_meta(row, file, line, names=_META_NAMES)
    mapped: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    empty: dict[str, tuple[str, Any]] = {}
    for key, value in own.items():
        found = TEST_CASE_FIELDS.get(key)
        if found is None:
            raise unknown_column(key, _CASE_KEYS, file=file, line=line)
        target = found.name
        cell = typed_cell(value, found.type, key, file, line)
        if blank(cell) or cell == []:  # another name of the field may hold its value
            empty.setdefault(target, (key, cell))
        elif target not in mapped:
            mapped[target] = cell
            given_as[target] = key
        elif mapped[target] != cell:  # which of them is meant is a guess
            raise InputError(
                f"given twice, as {given_as[target]!r} and as {key!r}, with different values",
                file=file,
                line=line,
                field=key,
            )
    for target, (key, cell) in empty.items():
        if target in mapped:
            continue
        if cell == []:  # a blank cell of chunks: the row says there are none
            mapped[target] = []
        elif ModelTestCase.model_fields[target].is_required():
            raise InputError(why_absent(cell, file), file=file, line=line, field=key)
    if mapped.get("name") is not None:
        mapped["name"] = str(mapped["name"])
    if meta:
        mapped[META] = meta
    return validate(ModelTestCase, mapped, file, line)


def numbered_test_cases(source: RowSource) -> Iterator[tuple[int, ModelTestCase]]:
    """Test cases with their lines; a repeated id is an error naming both lines."""
    name = source.name
    columns = Columns.of(source, _CASE_KEYS)
    seen: dict[str, int] = {}
    for line, row in source.rows:
        columns.check(row, line)
        case = test_case(row, name, line)
        if case.name is not None:
            column = next(
                (k for k in row if TEST_CASE_FIELDS.canonical(k) == "name" and not blank(row[k])),
                "id",
            )
            first_time(seen, case.name, f"id {case.name!r}", name, line, column)
        yield line, case
