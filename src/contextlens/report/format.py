"""How the report writes numbers, and how it reads runs, items and summaries: as objects or
as the dicts a stored run gives back."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "DASH",
    "as_dict",
    "ci_text",
    "finite",
    "first",
    "fmt_cost",
    "fmt_count",
    "fmt_diff",
    "fmt_prob",
    "fmt_score",
    "fmt_seconds",
    "get",
    "items_text",
    "iter_results",
    "pass_text",
    "rates_text",
    "values",
]

DASH = "—"


def finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, not a number or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt_score(value: Any) -> str:
    """A score as shown on the page: three decimals (``0.944``), a dash when missing."""
    number = finite(value)
    return DASH if number is None else f"{number:.3f}"


def fmt_diff(value: Any) -> str:
    """A signed difference: ``+0.120`` / ``-0.045``."""
    number = finite(value)
    return DASH if number is None else f"{number:+.3f}"


def fmt_prob(value: Any) -> str:
    """A probability as a percentage with one decimal: ``97.3%``."""
    number = finite(value)
    return DASH if number is None else f"{100 * number:.1f}%"


def fmt_count(value: Any) -> str:
    """An integer count with thousands separators: ``12,345``."""
    number = finite(value)
    return DASH if number is None else f"{round(number):,}"


def fmt_cost(cost: Any, unpriced_calls: Any = 0, calls: Any = 0) -> str:
    """Estimated USD; ``unknown`` when no call was priced, ``≥ $x`` when only some were."""
    number = finite(cost) or 0.0
    unpriced = int(finite(unpriced_calls) or 0)
    if unpriced and not number:
        return "unknown"
    text = f"${number:.4f}" if number < 1 else f"${number:,.2f}"
    if not (finite(calls) or number):
        return "$0"
    return f"≥ {text}" if unpriced else text


def fmt_seconds(value: Any) -> str:
    """A duration: ``0.84 s``, ``12.3 s``, ``4 min 05 s``, ``1 h 02 min``."""
    number = finite(value)
    if number is None:
        return DASH
    if number < 10:
        return f"{number:.2f} s"
    if number < 60:
        return f"{number:.1f} s"
    minutes, seconds = divmod(round(number), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def pass_text(summary: Any, missing: str = DASH) -> str:
    """``83% [71%, 91%] @0.7``: a metric's pass rate, its interval and its pass mark."""
    rate = finite(get(summary, "pass_rate"))
    if rate is None:
        return missing
    text = f"{rate:.0%}"
    low, high = finite(get(summary, "pass_low")), finite(get(summary, "pass_high"))
    if low is not None and high is not None:
        text += f" [{low:.0%}, {high:.0%}]"
    mark = finite(get(summary, "threshold"))
    if mark is not None:
        text += f" @{mark:g}"
    return text


def rates_text(a: Any, b: Any, missing: str = "-", arrow: str = "->") -> str:
    """``80% -> 85%``: the pass rates of two runs (A, then B)."""
    ra, rb = finite(a), finite(b)
    if ra is None and rb is None:
        return missing
    shown = [missing if r is None else f"{r:.0%}" for r in (ra, rb)]
    return f" {arrow} ".join(shown)


def items_text(summary: Any) -> str:
    """``200 (12 n/a, 40 not run, 3 not English)``: a metric's items, those neither scored
    nor failed, and those whose case has a text in another language."""
    parts = []
    if get(summary, "n_not_applicable"):
        parts.append(f"{get(summary, 'n_not_applicable')} n/a")
    if get(summary, "n_not_run"):
        parts.append(f"{get(summary, 'n_not_run')} not run")
    if get(summary, "n_not_english"):
        parts.append(f"{get(summary, 'n_not_english')} not English")
    return f"{get(summary, 'n', 0)}" + (f" ({', '.join(parts)})" if parts else "")


def ci_text(level: Any) -> str:
    number = finite(level)
    return "interval" if number is None else f"{100 * number:g}% interval"


def get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute ``name`` of ``obj`` (or its key, for a mapping)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def first(obj: Any, names: Sequence[str], default: Any = None) -> Any:
    for name in names:
        value = get(obj, name)
        if value is not None:
            return value
    return default


def as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "model_dump"):
        return dict(obj.model_dump())
    return dict(vars(obj)) if hasattr(obj, "__dict__") else {}


def values(collection: Any) -> list[Any]:
    if collection is None:
        return []
    if isinstance(collection, Mapping):
        return list(collection.values())
    return list(collection)


def iter_results(run: Any) -> Iterable[Any]:
    if hasattr(run, "iter_results"):
        return run.iter_results()
    return get(run, "results") or []
