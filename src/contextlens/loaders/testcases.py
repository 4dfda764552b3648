"""Rows as test cases: one case per row, its columns read through the field table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import TEST_CASE_FIELDS
from contextlens.loaders.cells import blank, first_time, typed_cell, validate, why_absent
from contextlens.loaders.columns import META, Columns, split_meta, unknown_column
from contextlens.schemas import ModelTestCase

__all__ = ["numbered_test_cases", "test_case"]

_CASE_KEYS = TEST_CASE_FIELDS.names


def test_case(row: Mapping[str, Any], file: str | None, line: int) -> ModelTestCase:
    """One row (its columns read through the field table) as a test case; errors name the
    file, the line and the column."""
    file = file or "<rows>"
    own, meta = split_meta(row, file, line)
    mapped: dict[str, Any] = {}
    empty: dict[str, tuple[str, Any]] = {}
    for key, value in own.items():
        target = TEST_CASE_FIELDS.canonical(key)
        if target is None:
            raise unknown_column(key, _CASE_KEYS, file=file, line=line)
        if target == META:
            continue
        cell = typed_cell(value, key, file, line)
        if blank(cell) or cell == []:  # another name of the field may hold its value
            empty.setdefault(target, (key, cell))
        elif target not in mapped:
            mapped[target] = cell
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


def numbered_test_cases(
    rows: Iterator[tuple[int, dict[str, Any]]], path: Path
) -> Iterator[tuple[int, ModelTestCase]]:
    """Test cases with their lines; a repeated id is an error naming both lines."""
    name = str(path)
    columns = Columns.of(path, _CASE_KEYS)
    seen: dict[str, int] = {}
    for line, row in rows:
        columns.check(row, line)
        case = test_case(row, name, line)
        if case.name is not None:
            column = next(
                (k for k in row if TEST_CASE_FIELDS.canonical(k) == "name" and not blank(row[k])),
                "id",
            )
            first_time(seen, case.name, f"id {case.name!r}", name, line, column)
        yield line, case
