"""What a case must meet before it is scored, and the id its results go by.

Cases given in Python are read by the same loader as ``contextlens run`` reads a file's
rows: a dict is a row (its keys through the field table and its aliases, ``meta`` and
``meta.NAME`` / ``meta_NAME`` keys the user's own data), a pandas DataFrame is rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.errors import InputError
from contextlens.fields import unmet_requirement
from contextlens.loaders import FRAME, is_frame, numbered_frame, session_object, test_case
from contextlens.loaders.cells import check_depth
from contextlens.runner.binding import BoundMetric
from contextlens.schemas import Dataset, ModelTestCase

__all__ = ["Case", "CaseChecks", "as_case", "case_id", "given_cases"]

Case = Dataset | ModelTestCase


def given_cases(cases: Any, bound: Sequence[BoundMetric] = ()) -> Any:
    """The cases of a pandas DataFrame, read as a file's rows are (see
    :func:`~contextlens.loaders.load_frame`) and each checked for the fields its ``bound``
    metrics require, an error naming the row as a file's names its line; anything else as
    it is."""
    if not is_frame(cases):
        return cases
    _, numbered = numbered_frame(cases)
    for row, case in numbered:
        for b in bound:
            if not b.applies_to(case):
                continue
            unmet = unmet_requirement(case, b.metric.requires, b.key)
            if unmet is not None:
                raise InputError(unmet[1], file=FRAME, line=row, field=unmet[0])
    return [case for _, case in numbered]


def as_case(raw: Any, index: int) -> Case:
    """``raw`` (a case, a pydantic model or a dict) as a session or a test case; a dict (or
    a model's fields) is read as a file's row is, a ``conversation`` making it a session."""
    if isinstance(raw, (Dataset, ModelTestCase)):
        return raw
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        raise InputError(
            f"case {index}: expected a Dataset, a ModelTestCase or a dict, got {type(raw).__name__}"
        )
    try:
        check_depth(raw, "", index)  # before anything walks it (files were checked as text)
        if "conversation" in raw:
            return session_object(raw, "", index)
        return test_case(raw, "", index)
    except InputError as err:
        raise InputError(f"case {index}: {err.message}", field=err.field) from None


def case_id(case: Case, index: int) -> str:
    """The id a case's results go by: a session's ``session_id``, a test case's ``name``,
    else ``case-000042`` from its place in the run."""
    if isinstance(case, Dataset):
        return case.session_id
    return case.name or f"case-{index:06d}"


class CaseChecks:
    """What a case must meet before it is scored: a unique id (a test case's ``name``, a
    session's ``session_id``) and the fields each of its metrics requires. Keeps the ids
    seen, nothing else."""

    def __init__(self, bound: Sequence[BoundMetric]) -> None:
        self.needs = [(b, b.metric.requires) for b in bound]
        self.seen: dict[tuple[bool, str], int] = {}
        self.done = False

    def one(self, raw: Any, index: int) -> Case:
        """``raw`` as a case, checked (once: a collection checked whole is not again)."""
        case = as_case(raw, index)
        if self.done:
            return case
        session = isinstance(case, Dataset)
        ident = case.session_id if session else case.name  # type: ignore[union-attr]
        if ident is not None:
            first = self.seen.setdefault((session, ident), index)
            if first != index:
                what = "session_id" if session else "id"
                raise InputError(
                    f"case {index}: duplicate {what} {ident!r} (also case {first})",
                    field="session_id" if session else "name",
                )
        for b, requires in self.needs:
            if b.applies_to(case):
                unmet = unmet_requirement(case, requires, b.key)
                if unmet is not None:
                    raise InputError(f"case {index}: {unmet[1]}", field=unmet[0])
        return case

    def all(self, cases: Iterable[Any]) -> list[Case]:
        """Every case of a collection, checked before any is scored."""
        checked = [self.one(raw, index) for index, raw in enumerate(cases)]
        self.done = True
        return checked
