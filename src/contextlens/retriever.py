"""Where sessions come from: the abstract :class:`Retriever` and a JSONL reader."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from contextlens.errors import InputError
from contextlens.nesting import MAX_DEPTH, deep_message, text_too_deep
from contextlens.schemas import Dataset, IterationLevel, StreamedBatch

M = TypeVar("M", bound=BaseModel)


class Retriever(ABC):
    """A source of sessions. Keyword arguments given to ``Context.run`` beyond its own
    reach the constructor and are kept in ``self.kwargs``.

    ``iteration_level`` says what :meth:`load_dataset` yields (gaussia's): sessions
    (:attr:`~IterationLevel.FULL_DATASET`, the default, or
    :attr:`~IterationLevel.STREAM_SESSIONS`) or one interaction at a time
    (:attr:`~IterationLevel.STREAM_BATCHES`, as :class:`~contextlens.schemas.StreamedBatch`
    items). Either way the parts of a session (several ``Dataset`` objects, or batches, with
    the same ``session_id``) are gathered into one session.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    @property
    def iteration_level(self) -> IterationLevel:
        """What :meth:`load_dataset` yields: sessions (the default) or streamed batches."""
        return IterationLevel.FULL_DATASET

    @abstractmethod
    def load_dataset(
        self,
    ) -> list[Dataset] | Iterator[Dataset] | list[StreamedBatch] | Iterator[StreamedBatch]:
        """Return the sessions (or streamed batches), as a list or lazily."""


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("conversation", 2, "weight")`` -> ``"conversation[2].weight"``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


#: What a field of each pydantic type expects, for "null is not allowed (expected ...)".
_EXPECTED = {
    "string_type": "text",
    "list_type": "a list",
    "tuple_type": "a list",
    "float_type": "a number",
    "int_type": "a number",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "bool_type": "true or false",
}


def null_message(expected: str = "text") -> str:
    """How a null where a value belongs is reported."""
    return f"null is not allowed (expected {expected})"


def input_error(exc: ValidationError, *, file: str | None, line: int | None) -> InputError:
    """The first problem of a pydantic validation error as an :class:`InputError`; a null
    where a value belongs is reported as null."""
    first = exc.errors()[0]
    extra = len(exc.errors()) - 1
    msg = first["msg"].removeprefix("Value error, ")
    if first.get("input", ...) is None and first["type"] != "missing":
        msg = null_message(_EXPECTED.get(first["type"], "a value"))
    elif "input" in first and first["type"] != "missing":
        msg += f" (got {first['input']!r:.80})"
    if extra:
        msg += f"; and {extra} more problem{'s' if extra > 1 else ''} on this line"
    return InputError(msg, file=file, line=line, field=field_path(first["loc"]) or None)


@contextmanager
def utf8_text(path: str | Path, *, newline: str | None = None) -> Iterator[IO[str]]:
    """``path`` opened as UTF-8 text, a byte-order mark skipped.

    Bytes that are not UTF-8 raise an :class:`InputError` naming the file, the line and
    the byte, wherever in the file they are read.
    """
    name = str(path)
    try:
        handle = open(path, encoding="utf-8-sig", newline=newline)  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", file=name) from exc
    try:
        with handle:
            yield handle
    except UnicodeDecodeError:
        raise _not_utf8(path) from None


def _not_utf8(path: str | Path) -> InputError:
    """The first line of ``path`` that is not UTF-8, as an :class:`InputError`."""
    name = str(path)
    with open(path, "rb") as raw:
        for lineno, data in enumerate(raw, start=1):
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                byte = data[exc.start]
                return InputError(
                    f"not UTF-8: byte 0x{byte:02x} at position {exc.start + 1} of the line; "
                    "save the file as UTF-8",
                    file=name,
                    line=lineno,
                )
    return InputError("not UTF-8; save the file as UTF-8", file=name)


def jsonl_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, object)`` for each non-blank line of a JSONL file, lazily.

    A byte-order mark is skipped. Errors (unreadable file, bytes that are not UTF-8,
    malformed JSON, a line that is not an object, a value nested more than
    :data:`~contextlens.nesting.MAX_DEPTH` deep) name the file and the line (and the field).
    """
    name = str(path)
    with utf8_text(path) as handle:
        for lineno, text in enumerate(handle, start=1):
            text = text.lstrip("\ufeff")  # a byte-order mark inside joined files too
            if not text.strip():
                continue
            deep = text_too_deep(text, MAX_DEPTH + 1)  # the line's object is one level more
            if deep is not None:
                raise InputError(deep_message(), file=name, line=lineno, field=deep.field())
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"malformed JSON at column {exc.colno}: {exc.msg}", file=name, line=lineno
                ) from None
            except RecursionError:
                raise InputError(
                    "the JSON is nested too deeply to be a case", file=name, line=lineno
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

    Blank lines and a byte-order mark are skipped; a repeated ``session_id`` is an error
    naming both lines.
    """

    def __init__(self, path: str | Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = Path(path)

    def load_dataset(self) -> Iterator[Dataset]:
        seen: dict[str, int] = {}
        for lineno, session in read_jsonl(self.path, Dataset):
            first = seen.setdefault(session.session_id, lineno)
            if first != lineno:
                raise InputError(
                    f"duplicate session_id {session.session_id!r} (also on line {first})",
                    file=str(self.path),
                    line=lineno,
                    field="session_id",
                )
            yield session
