"""The Bayesian bootstrap of a weighted mean: fast, reproducible, memory-bounded draws."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.random  # numpy loads it lazily; import it with the module, not mid-run

from contextlens.stats.weights import _as_values_weights

__all__ = ["NORMAL_LIMIT_MIN", "bayesian_bootstrap_means", "equal_tailed", "repeated_interval"]

# constant fixes the draws. Chunks are the unit of work of the thread pool.
_CHUNK_ELEMENTS = 1 << 20
# Elements generated and reduced at a time inside a chunk (1 MiB of float32, fits in L2).
_BLOCK_ELEMENTS = 1 << 18
# From this many elements (draws x interactions) on, near-equal values may be snapped to a grid
# of 1/_SNAP_LEVELS of their range so that they share draws (see _groups).
_SNAP_MIN_ELEMENTS = 1 << 24
_SNAP_LEVELS = 512
#: From this many interactions that share no draw (distinct value and weight pairs), the draws
#: come from the bootstrap's normal limit (see _normal_limit_draws).
NORMAL_LIMIT_MIN = 20_000
# Below this many elements the thread pool costs more than it saves.
_PARALLEL_MIN_ELEMENTS = 1 << 21


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
    split into fixed chunks of about 2**20 exponentials; chunk ``i`` uses the ``i``-th child
    of ``rng`` (as ``rng.spawn`` would give, but ``rng`` is not mutated, so equal inputs give
    equal draws). Large jobs run their chunks on two threads; the result does not depend on
    scheduling. Exponentials are float32, generated and reduced 2**18 at a time, so the extra
    memory is about 1 MiB per thread plus the float64 output.

    Interactions that share a value and a weight share one Gamma(k) draw (the sum of their
    ``k`` exponentials; an exact identity), which makes judge scores on a fixed scale cheap;
    for large jobs near-equal values are first snapped to a fine grid (see :func:`_groups`).

    From :data:`NORMAL_LIMIT_MIN` interactions on, when they share no draw, the draws come
    from the bootstrap's normal limit (its exact first-order variance), which at that size
    matches the bootstrap within Monte Carlo error at a fraction of the cost.

    Interactions with zero weight are dropped before drawing. The values are centred on the
    exact weighted mean before the float32 dot products, which keeps each draw within about
    1e-6 of a float64 computation on the same exponentials (for values in [0, 1]).
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
    return _means(x, w, int(mc_samples), rng)


def _means(x: np.ndarray, w: np.ndarray, mc: int, rng: np.random.SeedSequence) -> np.ndarray:
    """:func:`bayesian_bootstrap_means` of validated values and weights (1-D float64, finite,
    weights >= 0 with a positive sum; see ``_as_values_weights``)."""
    keep = w > 0.0
    x, w = x[keep], w[keep]
    w = w / w.sum()
    mean = float(np.dot(w, x))
    n = x.size
    out = np.full(mc, mean, dtype=np.float64)
    d = x - mean
    if n == 1 or not np.any(d) or x.min() == x.max():
        return out  # every draw is the mean

    dmax = float(np.abs(d).max())
    # merging needs 4 interactions per group: below 8, only equal values, which drew above
    grouped = (
        _groups(d, w, snap=n * mc >= _SNAP_MIN_ELEMENTS, step=dmax / _SNAP_LEVELS)
        if n >= 8
        else None
    )
    if grouped is not None:
        return out + _grouped_draws(*grouped, mc, rng)
    if n >= NORMAL_LIMIT_MIN:
        return out + _normal_limit_draws(d, w, mc, rng)

    # Centred numerator w*(x - mean) and denominator w, rescaled so that max |.| is 1.
    wmax = float(w.max())
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
        if safe.all():
            out[start:stop] += num / den * dmax
        else:
            out[start:stop] += np.divide(num, den, out=np.zeros_like(num), where=safe) * dmax

    if n * mc >= _PARALLEL_MIN_ELEMENTS and len(starts) > 1 and (workers := _workers()) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in [pool.submit(run, i) for i in range(len(starts))]:
                fut.result()
    else:
        for i in range(len(starts)):
            run(i)
    return out


def equal_tailed(draws: np.ndarray, level: float) -> tuple[float, float]:
    """The equal-tailed ``level`` interval of ``draws`` (1-D, not empty): the same two
    numbers as ``np.quantile(draws, [tail, 1 - tail])`` with its default (linear) method
    (NaN when a draw is NaN), for a fraction of its cost on the few thousand draws of one
    estimate. ``draws`` is left as it was."""
    tail = (1.0 - level) / 2.0
    n = draws.size
    if np.isnan(draws).any():
        return math.nan, math.nan
    top = n - 1
    picks: list[tuple[int, int, float]] = []
    for q in (tail, 1.0 - tail):
        at = top * q  # the virtual index, between the order statistics lo and hi
        if at >= top:
            lo = hi = top
        elif at < 0:
            lo = hi = 0
        else:
            lo = math.floor(at)
            hi = lo + 1
        picks.append((lo, hi, at - lo))
    ordered = np.partition(draws, sorted({i for lo, hi, _ in picks for i in (lo, hi)}))
    bounds = []
    for lo, hi, t in picks:
        a, b = float(ordered[lo]), float(ordered[hi])
        diff = b - a  # interpolated from the nearer end, as numpy's _lerp
        bounds.append(b - diff * (1.0 - t) if t >= 0.5 else a + diff * t)
    return bounds[0], bounds[1]


def _groups(
    d: np.ndarray, w: np.ndarray, *, snap: bool, step: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """Interactions with equal (centred value, weight) merged, when that shrinks the work.

    Returns the groups' centred values, weights, sizes and a constant offset, or None when
    merging would not pay (fewer than 4 interactions per group on average). The sum of ``k``
    standard exponentials is a Gamma(k) variable, so drawing one per group is exact.

    With ``snap`` (large jobs only), values are first snapped to a grid of ``step``
    (1/512 of their range) so that near-equal scores merge too; the snapping's weighted
    mean is added back as the offset, which leaves each draw within about
    ``step * sqrt(sum(w**2))`` (about 1e-5 at 10,000 equally weighted interactions) of the
    exact one.
    """
    for snapped in (False, True) if snap else (False,):
        dd = np.round(d / step) * step if snapped else d
        keys, inverse, counts = np.unique(
            np.stack([dd, w]), axis=1, return_inverse=True, return_counts=True
        )
        if keys.shape[1] * 4 <= d.size:
            offset = float(np.dot(w, d - dd)) if snapped else 0.0
            del inverse
            return keys[0], keys[1], counts, offset
    return None


def _grouped_draws(
    d: np.ndarray,
    w: np.ndarray,
    counts: np.ndarray,
    offset: float,
    mc: int,
    rng: np.random.SeedSequence,
) -> np.ndarray:
    """Draws of ``sum(G*w*d) / sum(G*w) + offset`` with ``G_j ~ Gamma(counts_j)``."""
    gen = np.random.Generator(np.random.PCG64(_child_seed(rng, 0)))
    shapes = counts.astype(np.float64)
    rows = max(1, _CHUNK_ELEMENTS // d.size)
    out = np.empty(mc, dtype=np.float64)
    for start in range(0, mc, rows):
        stop = min(start + rows, mc)
        g = gen.standard_gamma(shapes, size=(stop - start, d.size))
        out[start:stop] = (g @ (w * d)) / (g @ w)
    return out + offset


def _normal_limit_draws(
    d: np.ndarray, w: np.ndarray, mc: int, rng: np.random.SeedSequence
) -> np.ndarray:
    """Draws of the Bayesian bootstrap's centred weighted mean from its normal limit.

    With Dirichlet(1, ..., 1) weights, the centred weighted mean has variance
    ``n / (n + 1) * sum((w * d)**2) / sum(w)**2`` to first order; from tens of thousands of
    interactions on, its distribution is normal well within the Monte Carlo error of 5,000
    draws, and drawing ``n`` exponentials per draw would cost seconds for nothing.
    """
    n = d.size
    sd = math.sqrt(n / (n + 1) * float(np.sum((w * d) ** 2))) / float(w.sum())
    gen = np.random.Generator(np.random.PCG64(_child_seed(rng, 0)))
    return gen.standard_normal(mc) * sd


def repeated_interval(
    values: np.ndarray,
    weights: np.ndarray,
    *,
    mc_samples: int = 5000,
    ci_level: float = 0.95,
    rng: np.random.SeedSequence | None = None,
) -> tuple[float, float]:
    """Credible interval of the weighted mean when each item was judged ``k`` times.

    ``values`` is ``(n, k)``: item ``i``'s ``k`` repeated scores (NaN where a repeat failed;
    each item needs at least one). Each draw reweights the items with Dirichlet(1, ..., 1)
    times ``weights`` and takes one of each item's repeats at random, so the interval holds
    both the spread between items and the judge's own spread on each item.
    """
    x = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != w.size or x.shape[0] == 0:
        raise ValueError(f"values must be (n, k) with n = {w.size} > 0, got {x.shape}")
    valid = ~np.isnan(x)
    if not valid.any(axis=1).all():
        raise ValueError("every item needs at least one scored repeat")
    gen = np.random.Generator(np.random.PCG64(rng or np.random.SeedSequence(42)))
    n = x.shape[0]
    rows = max(1, _CHUNK_ELEMENTS // n)
    draws = np.empty(mc_samples, dtype=np.float64)
    counts = valid.sum(axis=1)
    order = np.argsort(~valid, axis=1, kind="stable")  # each row: its valid repeats first
    for start in range(0, mc_samples, rows):
        stop = min(start + rows, mc_samples)
        e = gen.standard_exponential((stop - start, n)) * w
        pick = (gen.random((stop - start, n)) * counts).astype(np.int64)
        chosen = x[np.arange(n), order[np.arange(n), pick]]
        draws[start:stop] = (e * chosen).sum(axis=1) / e.sum(axis=1)
    return equal_tailed(draws, ci_level)
