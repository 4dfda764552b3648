"""Interaction weights: resolving optional per-interaction weights, and weighted means."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

__all__ = ["WeightWarning", "resolve_weights", "weighted_mean"]

_SUM_TOL = 1e-6


class WeightWarning(UserWarning):
    """Interaction weights were inconsistent and have been replaced by equal weights."""


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
    x = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if x.ndim != 1 or w.ndim != 1:
        raise ValueError(f"values and weights must be 1-D, got shapes {x.shape} and {w.shape}")
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
