"""Hard negatives for the cross-encoder: a supported claim with one fact changed.

Four kinds, each keeping the claim's wording but for one span: an entity swap (a name for
another name of the same evidence window, so that both are "in the context"), a number
swap, a negation added or removed, and a date swap (a year, month or weekday changed).
"""

from __future__ import annotations

import re

import numpy as np

_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_NUMBER = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)(?![\w.,]\d)")
_MONTH = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b")
_DAY = re.compile(r"\b(" + "|".join(_DAYS) + r")\b")
_AUX = re.compile(
    r"\b(is|are|was|were|has|have|had|can|will|does|do|did|should|could|would|may|must)"
    r"(\s+not\b|n't\b)?",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
KINDS = ("entity", "number", "negation", "date")


def _date(claim: str, rng: np.random.Generator) -> str | None:
    if m := _YEAR.search(claim):
        year = int(m.group(1)) + int(rng.choice([-3, -2, -1, 1, 2, 3, 10]))
        return claim[: m.start()] + str(year) + claim[m.end() :]
    for pattern, names in ((_MONTH, _MONTHS), (_DAY, _DAYS)):
        if m := pattern.search(claim):
            other = [n for n in names if n != m.group(1)]
            return claim[: m.start()] + str(rng.choice(other)) + claim[m.end() :]
    return None


def _number(claim: str, rng: np.random.Generator) -> str | None:
    found = [m for m in _NUMBER.finditer(claim) if not _YEAR.fullmatch(m.group(1))]
    if not found:
        return None
    m = found[int(rng.integers(len(found)))]
    value = float(m.group(1))
    if "." in m.group(1):
        new = f"{value * float(rng.choice([0.5, 1.5, 2.0, 3.0])):.{len(m.group(1).split('.')[1])}f}"
    elif value < 20:
        new = str(int(value) + rng.integers(1, 6))
    else:
        new = str(round(value * float(rng.choice([0.5, 0.7, 1.3, 2.0]))))
    return None if new == m.group(1) else claim[: m.start()] + new + claim[m.end() :]


def _negation(claim: str, rng: np.random.Generator) -> str | None:
    m = _AUX.search(claim)
    if m is None:
        return None
    if m.group(2):  # "is not" / "isn't" -> "is"
        return claim[: m.start()] + m.group(1) + claim[m.end() :]
    return claim[: m.end()] + " not" + claim[m.end() :]


def _entity(claim: str, evidence: str, rng: np.random.Generator) -> str | None:
    names = list(_NAME.finditer(claim))
    if not names:
        return None
    m = names[int(rng.integers(len(names)))]
    pool = sorted({n.group(0) for n in _NAME.finditer(evidence)} - {n.group(0) for n in names})
    if not pool:
        return None
    return claim[: m.start()] + str(rng.choice(pool)) + claim[m.end() :]


def swap(claim: str, evidence: str, kind: str, rng: np.random.Generator) -> str | None:
    """``claim`` with one fact of ``kind`` changed, or None when it has none to change."""
    if kind == "entity":
        out = _entity(claim, evidence, rng)
    elif kind == "number":
        out = _number(claim, rng)
    elif kind == "negation":
        out = _negation(claim, rng)
    elif kind == "date":
        out = _date(claim, rng)
    else:
        raise ValueError(f"unknown swap {kind!r}; one of {KINDS}")
    return out if out and out != claim else None


def any_swap(claim: str, evidence: str, rng: np.random.Generator) -> tuple[str, str] | None:
    """One swap of a kind drawn at random among those the claim allows: (kind, new claim)."""
    for kind in rng.permutation(KINDS).tolist():
        out = swap(claim, evidence, kind, rng)
        if out is not None:
            return kind, out
    return None
