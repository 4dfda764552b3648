"""A cell as the type its field takes, what a blank or absent one means, and the errors a
row's values raise (a model that refuses them, an id given twice)."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from contextlens.errors import InputError
from contextlens.fields import TEST_CASE_FIELDS
from contextlens.retriever import input_error, null_message

__all__ = ["blank", "first_time", "is_csv", "typed_cell", "validate", "why_absent"]

_LIST_FIELDS = TEST_CASE_FIELDS.of_type("texts")
_ID_FIELDS = TEST_CASE_FIELDS.of_type("ids") | TEST_CASE_FIELDS.of_type("graded_ids")


def typed_cell(value: Any, field: str, file: str, line: int, *, lists: bool = True) -> Any:
    """A cell as the type its field takes: lists from JSON arrays, blanks as absent; a list
    of texts given as blank or null (a CSV's empty cell, pandas' ``None`` in JSON lines or
    Parquet) is an empty list: the row says there are none."""
    if value is None and lists and field in _LIST_FIELDS:
        return []
    if not isinstance(value, str):
        return value
    text = value.strip()
    if lists and field in _ID_FIELDS:
        if not text:
            return None
        if text[0] in "[{":
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"not a JSON array or object: {exc.msg}", file=file, line=line, field=field
                ) from None
        return [text]
    if lists and field in _LIST_FIELDS:
        if not text:
            return []  # a blank cell of chunks: the row says there are none
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                texts = _python_list_of_texts(text)  # as pandas' to_csv() writes a list
                if texts is not None:
                    return texts
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


def _python_list_of_texts(text: str) -> list[str] | None:
    """A Python literal list of strings (``['a', "b"]``, as ``DataFrame.to_csv()`` writes a
    list column), read as a literal and nothing else; None when it is not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def validate(model: type[BaseModel], row: Mapping[str, Any], file: str, line: int) -> Any:
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise input_error(exc, file=file, line=line) from None


def blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def why_absent(value: Any, file: str) -> str:
    """Why a required text field given as ``value`` (null or blank) is refused; a CSV has
    no null, only empty or missing cells."""
    if value is None and not is_csv(file):
        return null_message()
    return "empty is not allowed (expected text)"


def is_csv(file: str) -> bool:
    return file.lower().endswith(".csv")


def first_time(seen: dict[str, int], key: str, what: str, file: str, line: int, field: str) -> None:
    """Note that ``key`` is on ``line``; an :class:`InputError` naming both lines when an
    earlier line had it."""
    first = seen.setdefault(key, line)
    if first != line:
        raise InputError(
            f"duplicate {what} (also on line {first})", file=file, line=line, field=field
        )
