"""Interaction weights and the two statistical modes (frequentist, Bayesian) of the engine."""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "BayesianMode",
    "Estimate",
    "FrequentistMode",
    "StatisticalMode",
    "WeightWarning",
    "bayesian_bootstrap_means",
    "resolve_weights",
    "weighted_mean",
]

_SUM_TOL = 1e-6
# Elements (draws x interactions) of one chunk of exponentials: 2**22 float32 = 16 MiB.
_CHUNK_ELEMENTS = 1 << 22
# Elements generated and reduced at a time inside a chunk (1 MiB of float32, fits in L2).
_BLOCK_ELEMENTS = 1 << 18
# Below this many elements the thread pool costs more than it saves.
_PARALLEL_MIN_ELEMENTS = 1 << 23


class WeightWarning(UserWarning):
    """Interaction weights were inconsistent and have been replaced by equal weights."""


# --------------------------------------------------------------------------- weights


def resolve_weights(weights: Sequence[float | None], *, label: str = "") -> np.ndarray:
    """Turn optional per-interaction weights into a float64 array summing to 1.

    - all ``None``: ``1/n`` each;
    - all given, summing to 1 (within 1e-6): returned as given;
    - all given, not summing to 1: :class:`WeightWarning`, then equal weights;
    - some given, summing below 1: given ones kept, ``1 - sum`` split equally among the rest;
    - some given, summing to 1 or more: :class:`WeightWarning`, then equal weights.

    ``label`` (e.g. the session id) is named in warnings. Raises ``ValueError`` on an empty
    sequence or on a negative, NaN or infinite weight (naming its index).
    """
    n = len(weights)
    where = f"{label}: " if label else ""
    if n == 0:
        raise ValueError(f"{where}no weights given (empty sequence)")
    given: list[tuple[int, float]] = []
    for i, w in enumerate(weights):
        if w is None:
            continue
        fw = float(w)
        if not math.isfinite(fw) or fw < 0.0:
            raise ValueError(f"{where}weight at index {i} is {fw!r}; must be finite and >= 0")
        given.append((i, fw))

    equal = np.full(n, 1.0 / n, dtype=np.float64)
    if not given:
        return equal
    total = math.fsum(w for _, w in given)
    name = repr(label) if label else "weights"
    if len(given) == n:
        if abs(total - 1.0) <= _SUM_TOL:
            return np.array([w for _, w in given], dtype=np.float64)
        warnings.warn(
            f"{name}: the {n} weights sum to {total:.6g}, not 1; using equal weights",
            WeightWarning,
            stacklevel=2,
        )
        return equal
    if total < 1.0 - _SUM_TOL:
        share = (1.0 - total) / (n - len(given))
        out = np.full(n, share, dtype=np.float64)
        for i, w in given:
            out[i] = w
        return out
    warnings.warn(
        f"{name}: the {len(given)} given weights sum to {total:.6g} (>= 1), leaving nothing "
        f"for the {n - len(given)} unweighted interactions; using equal weights",
        WeightWarning,
        stacklevel=2,
    )
    return equal


def _as_values_weights(
    values: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Validated 1-D float64 copies of ``values`` and ``weights`` (weights not normalised)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if x.shape != w.shape:
        raise ValueError(f"{x.size} values but {w.size} weights")
    if x.size == 0:
        return x, w
    if not np.all(np.isfinite(x)):
        raise ValueError(f"value at index {int(np.argmin(np.isfinite(x)))} is not finite")
    bad = ~np.isfinite(w) | (w < 0.0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"weight at index {i} is {w[i]!r}; must be finite and >= 0")
    if not w.sum() > 0.0:
        raise ValueError("weights sum to 0")
    return x, w


def weighted_mean(
    values: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray
) -> float:
    """``sum(w * x) / sum(w)``; weights need not be normalised. Raises on empty input."""
    x, w = _as_values_weights(values, weights)
    if x.size == 0:
        raise ValueError("weighted mean of no values")
    return float(np.dot(w, x) / w.sum())


# --------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class Estimate:
    """A point value with an optional interval; ``None`` everywhere when ``n == 0``."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@runtime_checkable
class StatisticalMode(Protocol):
    """Aggregates per-interaction scores into an :class:`Estimate`."""

    @property
    def name(self) -> str: ...

    def estimate(
        self, values: Sequence[float] | np.ndarray, weights: np.ndarray, *, key: str = ""
    ) -> Estimate:
        """Estimate from ``values`` and resolved ``weights`` (any positive sum).

        ``key`` (e.g. the session id) identifies the estimate, for reproducible randomness.
        """
        ...


class FrequentistMode:
    """The weighted mean, without an interval."""

    @property
    def name(self) -> str:
        return "frequentist"

    def estimate(
        self, values: Sequence[float] | np.ndarray, weights: np.ndarray, *, key: str = ""
    ) -> Estimate:
        x, w = _as_values_weights(values, weights)
        if x.size == 0:
            return Estimate(None, None, None, 0)
        return Estimate(float(np.dot(w, x) / w.sum()), None, None, int(x.size))

    def __repr__(self) -> str:
        return "FrequentistMode()"


# --------------------------------------------------------------------------- Bayesian bootstrap


def _child_seed(seq: np.random.SeedSequence, index: int) -> np.random.SeedSequence:
    """The ``index``-th child of ``seq``, as a fresh ``seq.spawn`` would give; ``seq`` unchanged."""
    return np.random.SeedSequence(
        seq.entropy, spawn_key=(*seq.spawn_key, index), pool_size=seq.pool_size
    )


def _workers() -> int:
    return min(2, os.cpu_count() or 1)


def bayesian_bootstrap_means(
    values: Sequence[float] | np.ndarray,
    weights: Sequence[float] | np.ndarray,
    mc_samples: int,
    rng: np.random.SeedSequence,
) -> np.ndarray:
    """``mc_samples`` Bayesian-bootstrap draws of the weighted mean, as float64.

    Draw ``s`` is ``sum(g*w*x) / sum(g*w)`` with ``g ~ Dirichlet(1, ..., 1)``, built from
    standard exponentials (the Dirichlet normalisation cancels in the ratio). The draws are
    split into fixed chunks of about 2**22 exponentials; chunk ``i`` uses the ``i``-th child
    of ``rng`` (as ``rng.spawn`` would give, but ``rng`` is not mutated, so equal inputs give
    equal draws). Large jobs run their chunks on two threads; the result does not depend on
    scheduling. Memory stays bounded by a few chunks (about 16 MiB each).

    Interactions with zero weight are dropped before drawing. The values are centred on the
    exact weighted mean before the float32 products, which keeps the draws accurate to well
    below 1e-5 of the spread of the values.
    """
    if isinstance(mc_samples, bool) or not isinstance(mc_samples, (int, np.integer)):
        raise TypeError(f"mc_samples must be an int, got {type(mc_samples).__name__}")
    if mc_samples < 1:
        raise ValueError(f"mc_samples must be >= 1, got {mc_samples}")
    if not isinstance(rng, np.random.SeedSequence):
        raise TypeError(f"rng must be a numpy.random.SeedSequence, got {type(rng).__name__}")
    x, w = _as_values_weights(values, weights)
    if x.size == 0:
        raise ValueError("Bayesian bootstrap of no values")
    keep = w > 0.0
    x, w = x[keep], w[keep]
    w = w / w.sum()
    mean = float(np.dot(w, x))
    n = x.size
    mc = int(mc_samples)
    out = np.full(mc, mean, dtype=np.float64)
    d = x - mean
    if n == 1 or not np.any(d):
        return out  # every draw is the mean

    # Centred numerator w*(x - mean) and denominator w, rescaled so that max |.| is 1.
    wmax = float(w.max())
    dmax = float(np.abs(d).max())
    num_col = (w * d / (wmax * dmax)).astype(np.float32)
    den_col = (w / wmax).astype(np.float32)

    # Chunk i holds rows [i*rows, (i+1)*rows) of the (mc x n) exponential matrix, filled
    # row-major from child stream i. It is processed in cache-sized blocks; the block size does
    # not change the draws (the stream is consumed in the same order), only summation order.
    rows = max(1, min(mc, _CHUNK_ELEMENTS // n))
    block_rows = max(1, _BLOCK_ELEMENTS // n)
    cols = min(n, _BLOCK_ELEMENTS)
    starts = range(0, mc, rows)

    def run(index: int) -> None:
        start = starts[index]
        stop = min(start + rows, mc)
        gen = np.random.Generator(np.random.PCG64(_child_seed(rng, index)))
        num = np.zeros(stop - start, dtype=np.float64)
        den = np.zeros(stop - start, dtype=np.float64)
        buf = np.empty(min(stop - start, block_rows) * cols, dtype=np.float32)
        if cols == n:
            for r0 in range(0, stop - start, block_rows):
                r1 = min(r0 + block_rows, stop - start)
                e = buf[: (r1 - r0) * n].reshape(r1 - r0, n)
                gen.standard_exponential(out=e, dtype=np.float32)
                num[r0:r1] = e @ num_col
                den[r0:r1] = e @ den_col
        else:  # more interactions than one block: one row at a time, in column blocks
            for r in range(stop - start):
                for c0 in range(0, n, cols):
                    c1 = min(c0 + cols, n)
                    e = buf[: c1 - c0]
                    gen.standard_exponential(out=e, dtype=np.float32)
                    num[r] += float(e @ num_col[c0:c1])
                    den[r] += float(e @ den_col[c0:c1])
        safe = den > 0.0  # all exponentials 0 (float32 can give 0.0): treat as the mean
        out[start:stop] += np.divide(num, den, out=np.zeros_like(num), where=safe) * dmax

    workers = _workers()
    if workers > 1 and len(starts) > 1 and n * mc >= _PARALLEL_MIN_ELEMENTS:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in [pool.submit(run, i) for i in range(len(starts))]:
                fut.result()
    else:
        for i in range(len(starts)):
            run(i)
    return out


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
        rng_seed: int | None = 42,
        bounds: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        if isinstance(mc_samples, bool) or not isinstance(mc_samples, (int, np.integer)):
            raise TypeError(f"mc_samples must be an int, got {type(mc_samples).__name__}")
        if mc_samples < 100:
            raise ValueError(f"mc_samples must be >= 100 for a usable interval, got {mc_samples}")
        ci = float(ci_level)
        if not 0.0 < ci < 1.0:
            raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
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
        self.rng_seed = None if rng_seed is None else int(rng_seed)
        self.bounds = (low, high)
        self._entropy: int = (
            self.rng_seed if self.rng_seed is not None else int(np.random.SeedSequence().entropy)
        )

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
        draws = bayesian_bootstrap_means(x, w, self.mc_samples, self.seed_sequence(key))
        tail = (1.0 - self.ci_level) / 2.0
        low, high = np.quantile(draws, [tail, 1.0 - tail])
        return Estimate(value, float(low), float(high), n)

    def __repr__(self) -> str:
        return (
            f"BayesianMode(mc_samples={self.mc_samples}, ci_level={self.ci_level}, "
            f"rng_seed={self.rng_seed}, bounds={self.bounds})"
        )
