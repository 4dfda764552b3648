"""The cases a run read, as it records them beside its results: one :class:`CaseRecord` per
case in ``cases.jsonl``, keyed by the id its results go by, and the run's
:class:`DataFingerprint`.

Reports, ``to_pandas()`` and comparisons join a run's items to its cases on ``case_id``.
:class:`Lines` reads such a file when asked, so a run of any size is held in memory only
when the caller wants it all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar, overload

from pydantic import BaseModel, Discriminator, Tag

from contextlens.runfiles import read_records
from contextlens.runfiles import whole_lines as numbered_lines
from contextlens.schemas import Dataset, ModelTestCase

__all__ = ["CASES_FILE", "CaseRecord", "DataFingerprint", "Lines", "whole_lines"]

CASES_FILE = "cases.jsonl"
"""The name, in a run's folder, of the file of its cases."""

T = TypeVar("T")


def _kind(value: Any) -> str:
    """A session has a conversation; anything else is a test case."""
    if isinstance(value, dict):
        return "session" if "conversation" in value else "case"
    return "session" if isinstance(value, Dataset) else "case"


class CaseRecord(BaseModel):
    """One case of a run: ``case_id``, the id its results go by, and the case itself (a test
    case, or a session with its turns), ``meta`` included."""

    case_id: str
    case: Annotated[
        Annotated[ModelTestCase, Tag("case")] | Annotated[Dataset, Tag("session")],
        Discriminator(_kind),
    ]

    @property
    def meta(self) -> dict[str, Any]:
        return self.case.meta

    @property
    def is_session(self) -> bool:
        return isinstance(self.case, Dataset)

    def line(self) -> str:
        """The record as one line of ``cases.jsonl`` (fields left at their default omitted;
        a value JSON cannot hold, such as another library's object kept on the case, as its
        ``str()``)."""
        return self.model_dump_json(exclude_defaults=True, fallback=str) + "\n"


class DataFingerprint:
    """A SHA-256 of a run's cases that does not depend on their order: the sum, modulo
    2**256, of the digest of each case's line. Two runs over the same cases, in any order and
    at any concurrency, have the same fingerprint; a changed, added or removed case changes
    it."""

    def __init__(self) -> None:
        self.total = 0
        self.count = 0

    def add(self, line: str) -> None:
        digest = hashlib.sha256(line.encode("utf-8", "surrogatepass")).digest()
        self.total = (self.total + int.from_bytes(digest, "big")) % (1 << 256)
        self.count += 1

    def hexdigest(self) -> str | None:
        """The fingerprint, or None when no case was added."""
        return f"{self.total:064x}" if self.count else None


def whole_lines(path: Path) -> Iterator[str]:
    """The complete, non-blank lines of ``path`` (a writer that was killed may have cut the
    last one); nothing when the file is not there. Read as a file from elsewhere
    (:func:`contextlens.runfiles.whole_lines`: a regular file, bounded lines)."""
    for _, text in numbered_lines(path):
        yield text


class Lines(Sequence[T], Generic[T]):
    """Records read from a source when asked: iterating streams them; ``len()`` and
    indexing read them all once and keep them. ``source`` is called for each pass."""

    def __init__(self, source: Callable[[], Iterator[T]]) -> None:
        self._source = source
        self._held: list[T] | None = None

    @classmethod
    def of_file(cls, path: Path, parse: Callable[[str], T]) -> Lines[T]:
        """The records of the JSON-lines file ``path``, each read by ``parse`` (an error
        names the file and the line)."""
        return cls(lambda: read_records(path, parse))

    def _all(self) -> list[T]:
        if self._held is None:
            self._held = list(self._source())
        return self._held

    def __iter__(self) -> Iterator[T]:
        return iter(self._held) if self._held is not None else self._source()

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Lines)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Lines({'held' if self._held is not None else 'streamed'})"
