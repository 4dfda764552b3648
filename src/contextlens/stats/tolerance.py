"""How far a case's score may move between two runs and still count as unchanged: the
tolerance of a comparison, from the runs' repeated judgements or the spread of the paired
differences (see :mod:`contextlens.compare`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
from pydantic import BaseModel

__all__ = [
    "MAD_SCALE",
    "MIN_SPREAD_PAIRS",
    "MIN_TOLERANCE",
    "Basis",
    "Given",
    "Repeats",
    "Tolerance",
    "check_tolerance",
    "given_for",
    "tolerance_of",
]

MIN_TOLERANCE = 0.001
"""The smallest tolerance a comparison finds for itself: scores are shown to three decimals."""

MIN_SPREAD_PAIRS = 10
"""Paired differences needed to read the noise from their spread (without repeats)."""

#: The scale that makes a median absolute deviation a standard deviation under normal noise.
MAD_SCALE = 1.4826

Basis = Literal["given", "repeats", "differences", "floor"]


class Tolerance(BaseModel):
    """How far a case's score may move between A and B and still count as unchanged.

    ``value``: the tolerance; ``basis``: how it was found (``given`` by the caller,
    ``repeats``: the noise of the repeated judgements, ``differences``: the spread of the
    paired differences, ``floor``: :data:`MIN_TOLERANCE`, when neither measures any noise);
    ``noise``: the standard deviation of one case's difference it was derived from;
    ``how``: the rule, said in a sentence.
    """

    value: float
    basis: Basis
    how: str
    noise: float | None = None


@dataclass
class Repeats:
    """One run's repeated judgements of one metric: per item judged twice or more, the
    sample variance of its repeats and their number."""

    variances: list[float]
    counts: list[int]

    @property
    def single(self) -> float:
        """The variance of one judgement, pooled over the items."""
        return float(np.mean(self.variances))

    @property
    def of_mean(self) -> float:
        """The variance of an item's score (the mean of its repeats), pooled over the items."""
        return float(np.mean(np.array(self.variances) / np.array(self.counts)))

    @property
    def per_item(self) -> float:
        return float(np.mean(self.counts))


Given = float | Mapping[str, float] | None


def check_tolerance(tolerance: Given) -> None:
    given = tolerance.values() if isinstance(tolerance, Mapping) else [tolerance]
    for value in given:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
            raise TypeError(f"a tolerance must be a number, got {type(value).__name__}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"a tolerance must be a finite number >= 0, got {value!r}")


def given_for(tolerance: Given, name: str) -> float | None:
    if isinstance(tolerance, Mapping):
        value = tolerance.get(name, tolerance.get("*"))
        return None if value is None else float(value)
    return None if tolerance is None else float(tolerance)


def tolerance_of(
    diffs: np.ndarray,
    repeats: tuple[Repeats | None, Repeats | None],
    ci_level: float,
    given: float | None = None,
) -> Tolerance:
    """The tolerance of a metric (see the module docstring): ``given``, else ``z`` times
    the noise of one case's difference, from the repeated judgements or from the spread of
    the paired differences ``diffs``, at least :data:`MIN_TOLERANCE`."""
    if given is not None:
        return Tolerance(value=given, basis="given", how=f"±{given:g}, as given")
    z = NormalDist().inv_cdf(0.5 + ci_level / 2)
    ra, rb = repeats
    noise: float | None = None
    if ra is not None or rb is not None:
        one = (ra or rb).single  # type: ignore[union-attr]  # one of them is there
        var_a = ra.of_mean if ra is not None else one
        var_b = rb.of_mean if rb is not None else one
        noise = math.sqrt(var_a + var_b)
        per = (
            f"{ra.per_item:.3g} judgements a case in A" if ra else "one judgement a case in A"
        ) + (f", {rb.per_item:.3g} in B" if rb else ", one in B")
        spreads = "; ".join(
            f"one judgement's standard deviation {math.sqrt(r.single):.3f} in {side}"
            for side, r in (("A", ra), ("B", rb))
            if r is not None
        )
        basis: Basis = "repeats"
        source = (
            f"the noise of a case's B − A measured by the repeated judgements ({per}; {spreads})"
        )
    elif diffs.size >= MIN_SPREAD_PAIRS:
        noise = MAD_SCALE * float(np.median(np.abs(diffs - np.median(diffs))))
        basis = "differences"
        source = (
            f"the noise of a case's B − A read from the spread of the {diffs.size} paired "
            "differences (1.4826 × their median absolute deviation; no repeated judgements "
            "measure it)"
        )
    else:
        return Tolerance(
            value=MIN_TOLERANCE,
            basis="floor",
            how=f"±{MIN_TOLERANCE:g}, the smallest: {diffs.size} paired case(s) are too few to "
            f"read the noise from (at least {MIN_SPREAD_PAIRS}), and no run repeats its "
            "judgements",
        )
    value = z * noise
    if value < MIN_TOLERANCE:
        why = (
            f"the repeated judgements agree (their noise, {noise:.4f}, is below what three "
            "decimals show)"
            if basis == "repeats"
            else f"more than half of the {diffs.size} paired differences are alike (their "
            f"spread, {noise:.4f}, measures no noise)"
        )
        return Tolerance(
            value=MIN_TOLERANCE,
            basis="floor",
            noise=noise,
            how=f"±{MIN_TOLERANCE:g}, the smallest: {why}",
        )
    return Tolerance(
        value=value,
        basis=basis,
        noise=noise,
        how=f"±{value:.3f} = {z:.2f} × {noise:.4f}, {source}; {z:.2f} standard deviations "
        f"hold {ci_level:.0%} of normal noise",
    )
