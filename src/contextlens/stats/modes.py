"""The two statistical modes of the engine: frequentist (the weighted mean) and Bayesian (with
a credible interval), each with gaussia's StatisticalMode surface."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from contextlens.stats.bootstrap import _means, equal_tailed
from contextlens.stats.primitives import (
    Posterior,
    Result,
    check_divergence,
    point_aggregate,
    point_dispersion,
    point_divergence,
    point_rate,
)
from contextlens.stats.weights import _as_values_weights

__all__ = [
    "BayesianMode",
    "Estimate",
    "FrequentistMode",
    "StatisticalMode",
    "checked_mode",
    "estimates",
    "weighted_estimate",
]


@dataclass(frozen=True)
class Estimate:
    """A point value with an optional interval; ``None`` everywhere when ``n == 0``."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@runtime_checkable
class StatisticalMode(Protocol):
    """Aggregates per-interaction scores into an :class:`Estimate`.

    That is what the engine asks of a mode. Both built-in modes also have gaussia's
    StatisticalMode surface (``get_result_type``, ``distribution_divergence``,
    ``rate_estimation``, ``aggregate_metrics``, ``dispersion_metric``; see
    :mod:`contextlens.stats.primitives`).
    """

    @property
    def name(self) -> str: ...

    def estimate(
        self, values: Sequence[float] | np.ndarray, weights: np.ndarray, *, key: str = ""
    ) -> Estimate:
        """Estimate from ``values`` and resolved ``weights`` (any positive sum).

        ``key`` (e.g. the session id) identifies the estimate, for reproducible randomness.
        """
        ...


def weighted_estimate(
    mode: StatisticalMode, values: Sequence[float], weights: Sequence[float], *, key: str = ""
) -> Estimate:
    """``mode``'s estimate of ``values`` weighted by ``weights`` (a session's scored turns),
    the weights made to sum to 1; weights that sum to 0 count alike."""
    shares = np.asarray(weights, dtype=float)
    if shares.size:
        total = shares.sum()
        shares = shares / total if total > 0 else np.full(shares.size, 1 / shares.size)
    return mode.estimate(np.asarray(values, dtype=float), shares, key=key)


def estimates(mode: Any) -> bool:
    """Whether ``mode`` has an ``estimate`` of its own (not the empty one a subclass of
    :class:`StatisticalMode` inherits)."""
    found = getattr(type(mode), "estimate", None)
    return callable(found) and found is not getattr(StatisticalMode, "estimate", None)


def checked_mode(mode: Any) -> StatisticalMode:
    """``mode`` when it can estimate (:func:`estimates`); a TypeError names what it lacks."""
    if estimates(mode):
        return mode
    raise TypeError(
        f"statistical_mode: {type(mode).__name__} has no estimate(values, weights, *, key) of "
        "its own, which the engine calls; subclass FrequentistMode or BayesianMode, or give a "
        "mode written for gaussia (aggregate_metrics, get_result_type) to contextlens.Context, "
        "which adapts it"
    )


class FrequentistMode:
    """The weighted mean, without an interval; gaussia's primitives as point estimates."""

    @property
    def name(self) -> str:
        return "frequentist"

    def get_result_type(self) -> Literal["point_estimate"]:
        """What the primitives return: ``"point_estimate"`` (floats)."""
        return "point_estimate"

    def distribution_divergence(
        self,
        observed: dict[str, float],
        reference: dict[str, float],
        divergence_type: str = "total_variation",
    ) -> float:
        """Total variation between ``observed`` and ``reference``, both as proportions."""
        check_divergence(divergence_type)
        return point_divergence(observed, reference)

    def rate_estimation(self, successes: int, trials: int) -> float:
        """The proportion ``successes / trials`` (0.0 without trials)."""
        return point_rate(successes, trials)

    def aggregate_metrics(self, metrics: dict[str, Result], weights: dict[str, float]) -> float:
        """The weighted sum of ``metrics`` with the weights normalised (0.0 for no weight)."""
        return point_aggregate(metrics, weights)

    def dispersion_metric(self, values: dict[str, Result], center: str = "mean") -> float:
        """The mean absolute deviation of ``values`` from their ``"mean"`` or ``"median"``."""
        return point_dispersion(values, center)

    def estimate(
        self, values: Sequence[float] | np.ndarray, weights: np.ndarray, *, key: str = ""
    ) -> Estimate:
        x, w = _as_values_weights(values, weights)
        if x.size == 0:
            return Estimate(None, None, None, 0)
        return Estimate(float(np.dot(w, x) / w.sum()), None, None, int(x.size))

    def rate(self, successes: int, trials: int, *, key: str = "") -> Estimate:
        """The share ``successes / trials`` (a pass rate), without an interval."""
        if trials <= 0:
            return Estimate(None, None, None, 0)
        return Estimate(successes / trials, None, None, int(trials))

    def __repr__(self) -> str:
        return "FrequentistMode()"


def _key_words(key: str) -> tuple[int, ...]:
    """Four stable uint32 words of ``blake2b(key)`` (independent of ``PYTHONHASHSEED``)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))


class BayesianMode:
    """Weighted mean with an equal-tailed credible interval from a Bayesian bootstrap.

    The point value is the exact weighted mean; the interval comes from ``mc_samples`` draws
    of :func:`bayesian_bootstrap_means`. Each ``key`` (session id) gets its own random stream
    derived from ``rng_seed`` and a blake2b hash of the key, so results are reproducible and do
    not depend on the order in which sessions are estimated. ``rng_seed=None`` draws fresh
    entropy once, when the mode is created.

    gaussia's primitives are posterior summaries ``{"mean", "ci_low", "ci_high", "samples"}``
    of ``mc_samples`` draws from ``rng`` (seeded with ``rng_seed``, drawn on from call to
    call, so two estimates are independent): divergence under a symmetric
    Dirichlet(``dirichlet_prior``) prior, rates under a Beta(``beta_prior_a``,
    ``beta_prior_b``) prior.

    Edge cases:

    - no values: ``Estimate(None, None, None, 0)``;
    - one value: the interval is the whole score range ``bounds`` (default ``(0.0, 1.0)``,
      widened to include the value if it lies outside). A single observation says nothing
      about the spread, so for a bounded score the only honest credible interval is its full
      range; the bootstrap would return a zero-width interval;
    - all values identical: a zero-width interval. This is a known property of the (Bayesian)
      bootstrap, which only reweights the observed values; it is left as is.
    """

    def __init__(
        self,
        mc_samples: int = 5000,
        ci_level: float = 0.95,
        dirichlet_prior: float = 1.0,
        beta_prior_a: float = 1.0,
        beta_prior_b: float = 1.0,
        rng_seed: int | None = 42,
        bounds: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        if isinstance(mc_samples, bool) or not isinstance(mc_samples, (int, np.integer)):
            raise TypeError(f"mc_samples must be an int, got {type(mc_samples).__name__}")
        if mc_samples < 1:
            raise ValueError(f"mc_samples must be >= 1, got {mc_samples}")
        ci = float(ci_level)
        if not 0.0 < ci < 1.0:
            raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
        priors = {
            "dirichlet_prior": dirichlet_prior,
            "beta_prior_a": beta_prior_a,
            "beta_prior_b": beta_prior_b,
        }
        for name, value in priors.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if rng_seed is not None and (
            isinstance(rng_seed, bool) or not isinstance(rng_seed, (int, np.integer))
        ):
            raise TypeError(f"rng_seed must be an int or None, got {type(rng_seed).__name__}")
        if rng_seed is not None and rng_seed < 0:
            raise ValueError(f"rng_seed must be >= 0, got {rng_seed}")
        try:
            low, high = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise ValueError(f"bounds must be two numbers (low, high), got {bounds!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"bounds must be finite with low < high, got {bounds!r}")
        self.mc_samples = int(mc_samples)
        self.ci_level = ci
        self.dirichlet_prior = float(dirichlet_prior)
        self.beta_prior_a = float(beta_prior_a)
        self.beta_prior_b = float(beta_prior_b)
        self.rng_seed = None if rng_seed is None else int(rng_seed)
        self.bounds = (low, high)
        self._entropy: int = (
            self.rng_seed if self.rng_seed is not None else int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
        )
        #: The draws of the primitives (not of :meth:`estimate`, whose streams are per key).
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self._entropy)))

    @property
    def name(self) -> str:
        return "bayesian"

    def seed_sequence(self, key: str = "") -> np.random.SeedSequence:
        """The random stream of ``key``: ``rng_seed`` plus four blake2b words of the key."""
        return np.random.SeedSequence(self._entropy, spawn_key=_key_words(key))

    def estimate(
        self, values: Sequence[float] | np.ndarray, weights: np.ndarray, *, key: str = ""
    ) -> Estimate:
        x, w = _as_values_weights(values, weights)
        n = int(x.size)
        if n == 0:
            return Estimate(None, None, None, 0)
        value = float(np.dot(w, x) / w.sum())
        if n == 1:
            low, high = self.bounds
            return Estimate(value, min(low, value), max(high, value), 1)
        low, high = equal_tailed(
            _means(x, w, self.mc_samples, self.seed_sequence(key)), self.ci_level
        )
        return Estimate(value, low, high, n)

    def rate(self, successes: int, trials: int, *, key: str = "") -> Estimate:
        """The share ``successes / trials`` (a pass rate) with the equal-tailed credible
        interval of its Beta(``beta_prior_a`` + successes, ``beta_prior_b`` + failures)
        posterior, drawn from ``key``'s stream, reaching 0 or 1 when the share is 0 or 1.
        Unlike a bootstrap of 0/1 outcomes, 5 passes of 5 do not give a zero-width interval."""
        if trials <= 0:
            return Estimate(None, None, None, 0)
        rng = np.random.default_rng(self.seed_sequence(key))
        draws = rng.beta(
            self.beta_prior_a + successes,
            self.beta_prior_b + max(trials - successes, 0),
            size=self.mc_samples,
        )
        low, high = equal_tailed(draws, self.ci_level)
        # at a boundary the interval reaches it: every item passing is not placed above its
        # own upper bound (Brown, Cai and DasGupta's correction of the equal-tailed interval)
        if successes >= trials:
            high = 1.0
        if successes <= 0:
            low = 0.0
        return Estimate(successes / trials, low, high, int(trials))

    def get_result_type(self) -> Literal["distribution"]:
        """What the primitives return: ``"distribution"`` (posterior summaries)."""
        return "distribution"

    @property
    def _posterior(self) -> Posterior:
        return Posterior(self.mc_samples, self.ci_level, self.rng)

    def distribution_divergence(
        self,
        observed_counts: dict[str, float],
        reference: dict[str, float],
        divergence_type: str = "total_variation",
    ) -> dict[str, Any]:
        """Total variation between the posterior of the observed categories (given as
        counts) and ``reference``."""
        check_divergence(divergence_type)
        return self._posterior.divergence(observed_counts, reference, self.dirichlet_prior)

    def rate_estimation(self, successes: int, trials: int) -> dict[str, Any]:
        """The Beta-Binomial posterior of the rate ``successes / trials``."""
        return self._posterior.rate(successes, trials, self.beta_prior_a, self.beta_prior_b)

    def aggregate_metrics(
        self, metrics: dict[str, Result], weights: dict[str, float]
    ) -> dict[str, Any]:
        """The weighted sum of ``metrics``, draw by draw, with the weights normalised."""
        return self._posterior.aggregate(metrics, weights)

    def dispersion_metric(self, values: dict[str, Result], center: str = "mean") -> dict[str, Any]:
        """The mean absolute deviation of ``values`` from their ``"mean"`` or ``"median"``,
        draw by draw."""
        return self._posterior.dispersion(values, center)

    def __repr__(self) -> str:
        return (
            f"BayesianMode(mc_samples={self.mc_samples}, ci_level={self.ci_level}, "
            f"dirichlet_prior={self.dirichlet_prior}, beta_prior_a={self.beta_prior_a}, "
            f"beta_prior_b={self.beta_prior_b}, rng_seed={self.rng_seed}, "
            f"bounds={self.bounds})"
        )
