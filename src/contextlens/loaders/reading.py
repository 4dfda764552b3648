"""A file of cases read: its kind, its cases (lazily where they can be), and a check of
the whole file before a run's first judge call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import unmet_requirement
from contextlens.loaders.rows import read_rows
from contextlens.loaders.sessions import is_session_rows, numbered_sessions, sessions_from_rows
from contextlens.loaders.testcases import numbered_test_cases
from contextlens.metrics.metric import Metric
from contextlens.schemas import Dataset, ModelTestCase

__all__ = ["Counted", "case_kind", "check_cases", "load_cases"]


def _numbered(
    path: Path, *, keep: bool = True
) -> tuple[str, Iterator[tuple[int, Dataset]] | Iterator[tuple[int, ModelTestCase]]]:
    """The kind of the file's cases and the cases with their lines (flat session rows:
    the first line of each session)."""
    rows = read_rows(path)
    first = _first_row(path, rows)
    kind = _kind_of(first[1])
    if kind == "session_objects":
        rows.close()
        return "sessions", numbered_sessions(path)

    def chained() -> Iterator[tuple[int, dict[str, Any]]]:
        yield first
        yield from rows

    if kind == "sessions":
        return "sessions", iter(sessions_from_rows(chained(), path, keep=keep))
    return "test_cases", numbered_test_cases(chained(), path)


def _first_row(
    path: Path, rows: Iterator[tuple[int, dict[str, Any]]]
) -> tuple[int, dict[str, Any]]:
    if not path.exists():
        raise InputError("no such file", file=str(path))
    first = next(rows, None)
    if first is None:
        raise InputError("the file holds no rows", file=str(path))
    return first


def _kind_of(row: Mapping[str, Any]) -> str:
    if "conversation" in row:
        return "session_objects"
    return "sessions" if is_session_rows(set(row)) else "test_cases"


def case_kind(path: str | Path) -> str:
    """The kind of cases a file holds, ``"sessions"`` or ``"test_cases"``, from its first
    row."""
    path = Path(path)
    rows = read_rows(path)
    try:
        kind = _kind_of(_first_row(path, rows)[1])
    finally:
        rows.close()
    return "sessions" if kind == "session_objects" else kind


def load_cases(path: str | Path) -> tuple[str, Iterator[Dataset] | Iterator[ModelTestCase]]:
    """The cases of a file and their kind: ``"sessions"`` or ``"test_cases"``.

    JSONL session objects and all test cases are read lazily (an error is raised when its
    line is reached); flat session rows are grouped, which reads the whole file.
    """
    kind, numbered = _numbered(Path(path))
    return kind, (case for _, case in numbered)  # type: ignore[return-value]


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
    kind, numbered = _numbered(path, keep=False)
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
