"""A cell as the type its field takes, what a blank or absent one means, and the errors a
row's values raise (a model that refuses them, an id given twice).

Every kind of row is read alike (a CSV, JSONL or Parquet file's, a DataFrame's, a dict given
in Python): a cell of a list or object field that holds text is read as JSON, or else as the
Python literal ``str()`` writes (``['dep-01', 'dep-02']``, ``{'dep-01': 2}``: what
``DataFrame.to_csv()`` writes for a list or dict), and nothing else is evaluated. A value
nested more than :data:`~contextlens.nesting.MAX_DEPTH` deep is refused before it is
parsed, naming the file, the line and the field.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from contextlens.errors import InputError
from contextlens.fields import FieldType
from contextlens.loaders.rows import FRAME
from contextlens.nesting import deep_message, text_too_deep, value_too_deep
from contextlens.retriever import input_error, null_message

__all__ = [
    "blank",
    "check_depth",
    "first_time",
    "is_csv",
    "object_cell",
    "typed_cell",
    "unit_of",
    "validate",
    "why_absent",
]


def typed_cell(value: Any, kind: FieldType, column: str, file: str, line: int | None) -> Any:
    """A cell of ``column`` (a field of type ``kind``) as the type its field takes.

    Lists and objects given as text are read as JSON or a Python literal; one text is a
    list of one; a whole number given for an id is its text; a blank text of a number, an
    id list or an object is absent; a list of texts given as blank or null (a CSV's empty
    cell, pandas' ``None`` in JSON lines or Parquet) is an empty list: the row says there
    are none."""
    if kind == "texts":
        if value is None:
            return []
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return []
            return _structured(text, column, file, line) if text[0] == "[" else [value]
        return value
    if kind in ("ids", "graded_ids"):
        if _whole_number(value):
            return [value]
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text:
            return None
        if text[0] in "[{":  # an object of grades, or an object refused where ids belong
            return _structured(text, column, file, line)
        return [text]
    if kind == "id":
        return str(value) if _whole_number(value) else value
    if kind == "object":
        return object_cell(value, column, file, line)
    if (
        kind in ("interactions", "tool_calls")
        and isinstance(value, str)
        and value.strip().startswith("[")
    ):
        return _structured(value.strip(), column, file, line)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind in ("number", "flag") and not text:
        return None
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            raise InputError(
                f"expected a number, got {value!r}", file=file, line=line, field=column
            ) from None
    if column == "observation" and not text:
        return None
    return value


def check_depth(row: Mapping[str, Any], file: str, line: int | None, where: str = "") -> None:
    """An :class:`InputError` naming the file, the line and the field when a value of
    ``row`` (a dict given in Python, a row read) nests lists and objects more than
    :data:`~contextlens.nesting.MAX_DEPTH` deep, each field's value counted from 1."""
    for key, value in row.items():
        deep = value_too_deep(value)
        if deep is not None:
            field = deep.field(f"{where}{key}")
            raise InputError(deep_message(), file=file, line=line, field=field)


def object_cell(value: Any, column: str, file: str, line: int | None) -> Any:
    """A cell of an object field: a dict as it is, text read as a JSON object or a Python
    dict, blank as absent; anything else is an :class:`InputError`."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text[0] != "{":
            raise InputError(
                f"expected a JSON object, got {value!r:.60}", file=file, line=line, field=column
            )
        value = _structured(text, column, file, line)
    if value is not None and not isinstance(value, dict):
        raise InputError(
            f"expected a JSON object, got {value!r:.60}", file=file, line=line, field=column
        )
    return value


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: What a text opening with ``[`` or ``{`` must be, as a reader is told.
_SHAPES: dict[str, tuple[str, str, type]] = {
    "[": ("a JSON array", "a Python list", list),
    "{": ("a JSON object", "a Python dict", dict),
}


def _structured(text: str, column: str, file: str, line: int | None) -> Any:
    """``text`` (opening with ``[`` or ``{``) read as JSON, else as a Python literal (what
    ``str()`` of a list or dict writes); an :class:`InputError` when it is neither, or is
    not the list or object its opening promises."""
    json_name, python_name, shape = _SHAPES[text[0]]
    deep = text_too_deep(text, python=True)  # counts JSON's brackets as well
    if deep is not None:
        raise InputError(deep_message(), file=file, line=line, field=deep.field(column))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        value = _literal(text)
        if value is None:
            raise InputError(
                f"not {json_name} or {python_name}: {text!r:.60} (as JSON: {exc.msg} at "
                f"character {exc.pos + 1})",
                file=file,
                line=line,
                field=column,
            ) from None
    except RecursionError:
        raise InputError(
            "the value is nested too deeply to be read", file=file, line=line, field=column
        ) from None
    if not isinstance(value, shape):
        raise InputError(
            f"expected {json_name}, got {text!r:.60}", file=file, line=line, field=column
        )
    return value


def _literal(text: str) -> list[Any] | dict[Any, Any] | None:
    """A Python literal list or dict (``['a', "b"]``, ``{'dep-01': 2}``), read as a literal
    and nothing else (no name, call or operator is evaluated); None when it is not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (list, dict)) else None


def validate(model: type[BaseModel], row: Mapping[str, Any], file: str, line: int | None) -> Any:
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


def unit_of(file: str) -> str:
    """What a number of ``file`` counts: a CSV's or JSONL file's lines, a Parquet file's or
    a DataFrame's rows."""
    return "row" if file == FRAME or file.lower().endswith((".parquet", ".pq")) else "line"


def first_time(seen: dict[str, int], key: str, what: str, file: str, line: int, field: str) -> None:
    """Note that ``key`` is on ``line``; an :class:`InputError` naming both lines when an
    earlier line had it."""
    first = seen.setdefault(key, line)
    if first != line:
        raise InputError(
            f"duplicate {what} (also on {unit_of(file)} {first})",
            file=file,
            line=line,
            field=field,
        )
