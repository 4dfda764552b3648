"""gaussia's StatisticalMode primitives: distribution divergence, rate estimation, weighted
aggregation and dispersion, as point estimates and as posterior draws.

The point estimates (:class:`~contextlens.stats.FrequentistMode`) are floats; the posterior
ones (:class:`~contextlens.stats.BayesianMode`) are summaries ``{"mean", "ci_low",
"ci_high", "samples"}`` of Monte Carlo draws. Either kind may be aggregated or dispersed: a
summary counts by its draws (when it has as many as the mode draws) or its mean. With
nothing to estimate from (no categories, no trials, no weight, no values) the result is
gaussia's: 0.0, or a summary of zeros.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from contextlens.stats.bootstrap import equal_tailed

__all__ = [
    "DIVERGENCES",
    "Posterior",
    "point_aggregate",
    "point_dispersion",
    "point_divergence",
    "point_rate",
]

#: The divergences between distributions that are implemented.
DIVERGENCES = ("total_variation",)
_CENTERS = ("mean", "median")

#: A primitive's result: a point estimate, or a posterior summary.
Result = float | dict[str, Any]


def check_divergence(divergence_type: str) -> None:
    """``NotImplementedError`` for a divergence other than :data:`DIVERGENCES`."""
    if divergence_type not in DIVERGENCES:
        raise NotImplementedError(f"Divergence type '{divergence_type}' not implemented")


def _check_center(center: str) -> None:
    if center not in _CENTERS:
        raise ValueError(f"Unknown center type: {center!r} (expected 'mean' or 'median')")


def _value(result: Result) -> float:
    """A result as one number: a point estimate, or a summary's mean."""
    if isinstance(result, Mapping):
        return float(result.get("mean", 0.0))
    return float(result)


def _normalised(weights: Mapping[str, float]) -> dict[str, float] | None:
    total = math.fsum(float(w) for w in weights.values())
    if total == 0:
        return None
    return {k: float(w) / total for k, w in weights.items()}


def point_divergence(observed: Mapping[str, float], reference: Mapping[str, float]) -> float:
    """Total variation distance ``0.5 * sum(|p - q|)`` between two distributions given as
    proportions; a category missing from one of them has 0 there."""
    keys = set(observed) | set(reference)
    diffs = (abs(float(observed.get(k, 0.0)) - float(reference.get(k, 0.0))) for k in keys)
    return float(0.5 * math.fsum(diffs))


def point_rate(successes: int, trials: int) -> float:
    """``successes / trials``; 0.0 without trials."""
    return float(successes / trials) if trials > 0 else 0.0


def point_aggregate(metrics: Mapping[str, Result], weights: Mapping[str, float]) -> float:
    """The weighted sum of ``metrics`` under ``weights`` normalised to sum to 1 (0.0 when they
    sum to 0); every metric needs a weight (``KeyError`` else)."""
    normalised = _normalised(weights)
    if normalised is None:
        return 0.0
    return float(math.fsum(_value(v) * normalised[k] for k, v in metrics.items()))


def point_dispersion(values: Mapping[str, Result], center: str = "mean") -> float:
    """The mean absolute deviation of ``values`` from their mean or median (0.0 for none)."""
    _check_center(center)
    if not values:
        return 0.0
    x = np.array([_value(v) for v in values.values()], dtype=np.float64)
    mid = float(x.mean()) if center == "mean" else float(np.median(x))
    return float(np.abs(x - mid).mean())


@dataclass(frozen=True)
class Posterior:
    """Posterior draws of the primitives: ``mc_samples`` draws from ``rng``, summarised by
    their mean and equal-tailed ``ci_level`` interval."""

    mc_samples: int
    ci_level: float
    rng: np.random.Generator

    def summary(self, samples: np.ndarray) -> dict[str, Any]:
        """``{"mean", "ci_low", "ci_high", "samples"}`` of ``samples`` (zeros when empty)."""
        samples = np.asarray(samples, dtype=np.float64)
        if samples.size == 0:
            return self.empty()
        low, high = equal_tailed(samples, self.ci_level)
        return {
            "mean": float(samples.mean()),
            "ci_low": low,
            "ci_high": high,
            "samples": samples,
        }

    def empty(self) -> dict[str, Any]:
        """The summary of no evidence: every value 0 (gaussia's)."""
        return {
            "mean": 0.0,
            "ci_low": 0.0,
            "ci_high": 0.0,
            "samples": np.zeros(self.mc_samples),
        }

    def divergence(
        self, counts: Mapping[str, float], reference: Mapping[str, float], prior: float
    ) -> dict[str, Any]:
        """Total variation between the Dirichlet(``prior`` + counts) posterior of the observed
        categories and ``reference`` (renormalised over them; a category it lacks gets
        ``1 / k``)."""
        categories = list(counts)
        if not categories:
            return self.empty()
        alpha = prior + np.array([float(counts[k]) for k in categories])
        ref = np.array([float(reference.get(k, 1.0 / len(categories))) for k in categories])
        ref = ref / ref.sum()
        draws = self.rng.dirichlet(alpha, size=self.mc_samples)
        return self.summary(0.5 * np.abs(draws - ref).sum(axis=1))

    def rate(self, successes: int, trials: int, a: float, b: float) -> dict[str, Any]:
        """Draws of the Beta(``a`` + successes, ``b`` + failures) posterior of a rate."""
        if trials <= 0:
            return self.empty()
        failures = max(trials - successes, 0)
        return self.summary(self.rng.beta(a + successes, b + failures, size=self.mc_samples))

    def _draws(self, result: Result) -> np.ndarray:
        """A result as ``mc_samples`` draws: its own, or its value repeated."""
        if isinstance(result, Mapping):
            samples = result.get("samples")
            if samples is not None and len(samples) == self.mc_samples:
                return np.asarray(samples, dtype=np.float64)
        return np.full(self.mc_samples, _value(result))

    def aggregate(
        self, metrics: Mapping[str, Result], weights: Mapping[str, float]
    ) -> dict[str, Any]:
        """Draws of the weighted sum of ``metrics`` (a metric without a weight counts 0)."""
        normalised = _normalised(weights)
        if normalised is None:
            return self.empty()
        total = np.zeros(self.mc_samples)
        for name, result in metrics.items():
            total += normalised.get(name, 0.0) * self._draws(result)
        return self.summary(total)

    def dispersion(self, values: Mapping[str, Result], center: str = "mean") -> dict[str, Any]:
        """Draws of the mean absolute deviation of ``values`` from their mean or median."""
        _check_center(center)
        if not values:
            return self.empty()
        draws = np.array([self._draws(v) for v in values.values()])
        mid = draws.mean(axis=0) if center == "mean" else np.median(draws, axis=0)
        return self.summary(np.abs(draws - mid).mean(axis=0))
