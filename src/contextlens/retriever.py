"""Where sessions come from: the abstract :class:`Retriever` and a JSONL reader."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contextlens.errors import InputError
from contextlens.schemas import Dataset

M = TypeVar("M", bound=BaseModel)


class Retriever(ABC):
    """A source of sessions. Keyword arguments given to ``Context.run`` beyond its own
    reach the constructor and are kept in ``self.kwargs``."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    @abstractmethod
    def load_dataset(self) -> list[Dataset] | Iterator[Dataset]:
        """Return the sessions, as a list or lazily."""


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("conversation", 2, "weight")`` -> ``"conversation[2].weight"``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def input_error(exc: ValidationError, *, file: str | None, line: int | None) -> InputError:
    """The first problem of a pydantic validation error as an :class:`InputError`."""
    first = exc.errors()[0]
    extra = len(exc.errors()) - 1
    msg = first["msg"]
    if "input" in first and first["type"] != "missing":
        msg += f" (got {first['input']!r:.80})"
    if extra:
        msg += f"; and {extra} more problem{'s' if extra > 1 else ''} on this line"
    return InputError(msg, file=file, line=line, field=field_path(first["loc"]) or None)


def jsonl_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, object)`` for each non-blank line of a JSONL file, lazily.

    Errors (unreadable file, malformed JSON, a line that is not an object) name the file
    and the line.
    """
    name = str(path)
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", file=name) from exc
    with handle:
        for lineno, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"malformed JSON at column {exc.colno}: {exc.msg}", file=name, line=lineno
                ) from None
            if not isinstance(raw, dict):
                raise InputError(
                    f"expected a JSON object, got {type(raw).__name__}", file=name, line=lineno
                )
            yield lineno, raw


def read_jsonl(path: str | Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """Validate each non-blank line of a JSONL file as ``model``, lazily.

    Yields ``(line_number, object)``; errors name the file, the line and the field.
    """
    for lineno, raw in jsonl_objects(path):
        try:
            yield lineno, model.model_validate(raw)
        except ValidationError as exc:
            raise input_error(exc, file=str(path), line=lineno) from None


class JsonlRetriever(Retriever):
    """Sessions from a JSONL file, one :class:`Dataset` object per line, read lazily.

    Blank lines are skipped; a repeated ``session_id`` is an error.
    """

    def __init__(self, path: str | Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = Path(path)

    def load_dataset(self) -> Iterator[Dataset]:
        seen: set[str] = set()
        for lineno, session in read_jsonl(self.path, Dataset):
            if session.session_id in seen:
                raise InputError(
                    f"duplicate session_id {session.session_id!r}",
                    file=str(self.path),
                    line=lineno,
                    field="session_id",
                )
            seen.add(session.session_id)
            yield session
