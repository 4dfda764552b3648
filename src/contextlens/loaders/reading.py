"""A file of cases read: its kind, its cases (lazily where they can be), and a check of
the whole file before a run's first judge call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import unmet_requirement
from contextlens.loaders.rows import FRAME, RowSource, file_rows, frame_rows, read_rows
from contextlens.loaders.sessions import is_session_rows, numbered_sessions, sessions_from_rows
from contextlens.loaders.testcases import numbered_test_cases
from contextlens.metrics.metric import Metric
from contextlens.schemas import Dataset, ModelTestCase

__all__ = ["Counted", "case_kind", "check_cases", "load_cases", "load_frame", "numbered_frame"]

Numbered = Iterator[tuple[int, Dataset]] | Iterator[tuple[int, ModelTestCase]]


def _numbered(source: RowSource, *, keep: bool = True) -> tuple[str, Numbered]:
    """The kind of the source's cases and the cases with their lines (flat session rows:
    the first line of each session)."""
    first = next(source.rows, None)
    if first is None:
        what = FRAME if source.name == FRAME else "file"
        raise InputError(f"the {what} holds no rows", file=source.name)
    kind = _kind_of(first[1])
    rest = source.rows

    def chained() -> Iterator[tuple[int, dict[str, Any]]]:
        yield first
        yield from rest

    source.rows = chained()
    if kind == "session_objects":
        return "sessions", numbered_sessions(source)
    if kind == "sessions":
        return "sessions", iter(sessions_from_rows(source, keep=keep))
    return "test_cases", numbered_test_cases(source)


def _file_source(path: Path) -> RowSource:
    if not path.exists():
        raise InputError("no such file", file=str(path))
    return file_rows(path)


def _kind_of(row: Mapping[str, Any]) -> str:
    if "conversation" in row:
        return "session_objects"
    return "sessions" if is_session_rows(set(row)) else "test_cases"


def case_kind(path: str | Path) -> str:
    """The kind of cases a file holds, ``"sessions"`` or ``"test_cases"``, from its first
    row."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", file=str(path))
    rows = read_rows(path)
    try:
        first = next(rows, None)
    finally:
        rows.close()
    if first is None:
        raise InputError("the file holds no rows", file=str(path))
    kind = _kind_of(first[1])
    return "sessions" if kind == "session_objects" else kind


def load_cases(path: str | Path) -> tuple[str, Iterator[Dataset] | Iterator[ModelTestCase]]:
    """The cases of a file and their kind: ``"sessions"`` or ``"test_cases"``.

    JSONL session objects and all test cases are read lazily (an error is raised when its
    line is reached); flat session rows are grouped, which reads the whole file.
    """
    kind, numbered = _numbered(_file_source(Path(path)))
    return kind, (case for _, case in numbered)  # type: ignore[return-value]


def load_frame(frame: Any) -> tuple[str, list[Dataset] | list[ModelTestCase]]:
    """The cases of a pandas DataFrame and their kind, read as the rows of a file are: each
    row a test case (its columns through the field table and its aliases; ``meta`` and
    ``meta.NAME`` columns the user's own data), or a session object (a ``conversation``
    column), or an interaction (``session_id`` + ``qa_id`` columns, grouped into sessions).
    List and object cells may be lists and dicts, numpy arrays, or text as ``to_csv()``
    writes them. Errors name the ``DataFrame``, the row's position (from 0, as ``iloc``
    takes it) and the column."""
    kind, numbered = numbered_frame(frame)
    return kind, [case for _, case in numbered]  # type: ignore[return-value]


def numbered_frame(
    frame: Any,
) -> tuple[str, list[tuple[int, Dataset]] | list[tuple[int, ModelTestCase]]]:
    """The cases of a DataFrame (as :func:`load_frame` reads them), each with its row (a
    session: its first row), and their kind."""
    kind, numbered = _numbered(frame_rows(frame))
    return kind, list(numbered)  # type: ignore[return-value]


class Counted(Iterator[Any]):
    """Cases read lazily whose number is known (from :func:`check_cases`): ``len()`` gives
    it, so a run can show its progress against the total."""

    def __init__(self, cases: Iterator[Any], count: int) -> None:
        self._cases = cases
        self._count = count

    def __iter__(self) -> Counted:
        return self

    def __next__(self) -> Any:
        return next(self._cases)

    def __len__(self) -> int:
        return self._count


def check_cases(
    path: str | Path, metrics: Sequence[tuple[str, Metric[Any]]] = ()
) -> tuple[str, int]:
    """Read the whole file once and raise the first problem :func:`load_cases` would meet,
    or a case missing a field that one of ``metrics`` (``(name, metric)`` pairs) requires;
    return the kind and the number of cases.

    Memory stays flat: only the ids seen are kept (for flat session rows, each session's
    fields, first interaction and ``qa_id`` lines).
    """
    path = Path(path)
    kind, numbered = _numbered(_file_source(path), keep=False)
    needs = [(name, m, m.requires) for name, m in metrics]
    count = 0
    for line, case in numbered:
        count += 1
        for name, m, requires in needs:
            if not isinstance(case, m.case_type):
                continue
            unmet = unmet_requirement(case, requires, name)
            if unmet is not None:
                raise InputError(unmet[1], file=str(path), line=line, field=unmet[0])
    return kind, count
