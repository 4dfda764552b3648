"""How deeply a value read from outside may nest lists and objects: :data:`MAX_DEPTH`.

A case's field holds at most :data:`MAX_DEPTH` levels of lists and objects (its own value,
when it is a list or an object, is level 1: ``{"meta": {"a": [1]}}`` nests ``meta`` 2 deep).
The limit is checked where a value comes in (a JSONL line, a CSV cell read as JSON or as a
Python literal, a Parquet or DataFrame cell, a dict or model given in Python), before it is
parsed or validated, so a value too deep is refused there, naming its file, line and field,
and never breaks a run later (its own ``cases.jsonl`` read back, its results written).

Both checks are iterative: neither can overflow the stack, whatever the depth. The text
check counts the brackets outside strings (JSON, or Python literals: ``'...'``, ``"..."``,
triple quotes, and tuples' parentheses), with the keys on the way to name the field.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_DEPTH", "Deep", "deep_message", "text_too_deep", "value_too_deep"]

MAX_DEPTH = 64
"""The most levels of lists and objects a field's value may nest."""

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}:,]', re.DOTALL)
_PYTHON_TOKENS = re.compile(
    r"'''(?:[^\\]|\\.)*?(?:'''|$)|\"\"\"(?:[^\\]|\\.)*?(?:\"\"\"|$)"
    r"|'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[\[\](){}:,]",
    re.DOTALL,
)
_OPEN, _CLOSE = frozenset("[{("), frozenset("]})")
_SCALARS = (str, bytes, bytearray, int, float, bool)


@dataclass(frozen=True)
class Deep:
    """Where a value is nested more than allowed: ``path``, the keys and positions that lead
    to it (at most the first two: ``("meta", "a")``)."""

    path: tuple[str | int, ...]

    def field(self, prefix: str | None = None) -> str | None:
        """The field it is in, as errors name one (``meta.a``, ``retrieval_context[0]``):
        the first two keys of the path, or ``prefix`` (the column or key whose value was
        checked) and the first."""
        out = prefix or ""
        for part in self.path[: 1 if prefix else 2]:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out or None


def deep_message(limit: int = MAX_DEPTH) -> str:
    """What an error says of a value nested too deeply."""
    return (
        f"the value is nested too deeply: more than {limit} levels of lists and objects "
        f"inside one another ({limit} at most)"
    )


def text_too_deep(text: str, limit: int = MAX_DEPTH, *, python: bool = False) -> Deep | None:
    """Where the JSON ``text`` (``python``: a Python literal) opens more than ``limit``
    lists or objects inside one another, or None; the keys of the first two levels name
    where. Counted outside strings, in one pass that does not recurse."""
    if sum(text.count(c) for c in "[{(") <= limit:  # the common case, at C speed
        return None
    tokens = _PYTHON_TOKENS if python else _JSON_TOKENS
    keys: list[str | int] = []  # the key of each open object (an index for a list)
    last: str | None = None  # the string just before, a key when a ':' follows it
    for match in tokens.finditer(text):
        token = match.group()
        head = token[0]
        if head in "\"'":
            last = token
            continue
        if head == ":":
            if last is not None and keys:
                keys[-1] = _key(last, python)
        elif head == ",":
            if keys and isinstance(keys[-1], int):
                keys[-1] += 1
        elif head in _OPEN:
            keys.append(0 if head != "{" else "")
            if len(keys) > limit:
                return Deep(tuple(k for k in keys[:2] if k != ""))
        elif head in _CLOSE and keys:
            keys.pop()
        last = None
    return None


def _key(token: str, python: bool) -> str:
    """A key as the text it stands for (its quotes and escapes read), or as written."""
    try:
        value = ast.literal_eval(token) if python else json.loads(token)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return token.strip("\"'")
    return str(value)


def value_too_deep(value: Any, limit: int = MAX_DEPTH) -> Deep | None:
    """Where ``value`` (lists, tuples, sets, dicts, numpy arrays) nests more than ``limit``
    of them inside one another, or None; walked without recursion (a model inside is a
    value of its own, checked when it is made)."""
    if isinstance(value, _SCALARS) or value is None:  # most cells: nothing to walk
        return None
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 0, ())]
    walked: dict[int, int] = {}  # container id -> the greatest depth it was walked at
    while stack:
        item, depth, path = stack.pop()
        children = _children(item)
        if children is None:
            continue
        depth += _array_depth(item) or 1
        if depth > limit:  # a cycle comes back deeper each time, so it ends here too
            return Deep(path[:2])
        if walked.get(id(item), -1) >= depth:  # shared, and walked as deep before
            continue
        walked[id(item)] = depth
        for key, child in children:
            if not isinstance(child, _SCALARS) and child is not None:
                stack.append((child, depth, path if len(path) >= 2 else (*path, key)))
    return None


def _children(item: Any) -> Iterator[tuple[str | int, Any]] | None:
    """The members of a container with their keys, or None when ``item`` holds none."""
    if isinstance(item, _SCALARS) or item is None:
        return None
    if isinstance(item, Mapping):
        return ((str(k), v) for k, v in item.items())
    if isinstance(item, (list, tuple, set, frozenset)):
        return enumerate(item)
    if _array_depth(item):
        if getattr(item.dtype, "kind", "") != "O":
            return iter(())  # numbers only: its dimensions are its depth
        return enumerate(item.ravel().tolist())
    return None


def _array_depth(item: Any) -> int:
    """The dimensions of a numpy array (0 for a scalar, or for anything else)."""
    ndim = getattr(item, "ndim", 0) if hasattr(item, "dtype") else 0
    return ndim if isinstance(ndim, int) else 0
