"""The metric registry: every metric by its name, for the CLI, ``calibrate``, the pytest
plugin and ``evaluate``.

A metric registers itself where it is defined, as Inspect AI registers scorers::

    @metric(
        "context-precision",
        reads=("input", "actual_output", "expected_output", "retrieval_context"),
        requires=("actual_output", ("expected_output", "retrieval_context", "context")),
    )
    class ContextPrecisionScorer: ...

``requires`` names the case fields a metric cannot do without (a tuple entry: one of them);
a case missing one is refused before anything is scored.

The built-in metrics are the modules of :mod:`contextlens.metrics`, found and imported on
first use, so a new metric is one module (with its prompts and tests) and nothing else is
edited. Other packages add theirs through the ``contextlens.metrics`` entry point group (an
entry point naming a module that registers on import); code of one's own registers simply by
running the decorator before the registry is read.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar

from contextlens.errors import ContextLensError
from contextlens.metrics.base import Metric, Requirement, as_requires

__all__ = ["MetricInfo", "UnknownMetricError", "create", "get", "metric", "names", "registered"]

ENTRY_POINT_GROUP = "contextlens.metrics"
_NOT_METRICS = frozenset({"base", "registry", "prompts"})

F = TypeVar("F", bound=Callable[..., Any])


class UnknownMetricError(ContextLensError, LookupError):
    """No metric is registered under the name; the message lists the known ones."""


@dataclass(frozen=True)
class MetricInfo:
    """A registered metric: how to make it and what it takes.

    ``factory()`` makes it with its defaults; ``case_type`` is the kind of case it scores;
    ``reads`` the case fields it uses and ``requires`` those it cannot do without, each a
    field name or a tuple of alternatives (``contextlens schema`` shows both).
    """

    name: str
    factory: Callable[..., Metric[Any]]
    case_type: type
    description: str
    reads: tuple[str, ...]
    requires: tuple[Requirement, ...] = ()


_registry: dict[str, MetricInfo] = {}
_lock = threading.RLock()
_loaded = False


def metric(
    name: str,
    *,
    case_type: type | None = None,
    reads: Sequence[str] = (),
    requires: Sequence[str | Sequence[str]] | None = None,
    description: str | None = None,
) -> Callable[[F], F]:
    """Register the decorated class (or factory function) under ``name``.

    ``case_type``, ``requires`` and ``description`` default to the class's ``case_type``
    and ``requires`` attributes and the first line of its docstring. ``requires`` given here
    is set as the class's ``requires`` attribute, which the runner reads (a factory
    function's metric declares its own). A name can be registered once; registering another
    object under a taken name raises ``ValueError``.
    """
    if not name or name != name.strip() or " " in name:
        raise ValueError(f"metric name {name!r}: use a non-empty name without spaces")

    def register(factory: F) -> F:
        kind = case_type or getattr(factory, "case_type", None)
        if not isinstance(kind, type):
            raise TypeError(f"metric {name!r}: give case_type= or a class attribute case_type")
        try:
            needs = as_requires(getattr(factory, "requires", ()) if requires is None else requires)
        except TypeError as exc:
            raise TypeError(f"metric {name!r}: {exc}") from None
        if requires is not None and isinstance(factory, type):
            factory.requires = needs  # type: ignore[attr-defined]
        doc = (factory.__doc__ or "").strip().splitlines()
        info = MetricInfo(
            name=name,
            factory=factory,
            case_type=kind,
            description=description or (doc[0] if doc else ""),
            reads=tuple(reads),
            requires=needs,
        )
        with _lock:
            known = _registry.get(name)
            if known is not None and known.factory is not factory:
                raise ValueError(f"metric {name!r} is already registered by {known.factory!r}")
            _registry[name] = info
        return factory

    return register


def _load() -> None:
    """Import the built-in metric modules and the entry points, once."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        package = importlib.import_module("contextlens.metrics")
        for module in pkgutil.iter_modules(package.__path__):
            if module.name not in _NOT_METRICS and not module.name.startswith("_"):
                importlib.import_module(f"contextlens.metrics.{module.name}")
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                entry.load()
            except Exception as exc:  # one broken plugin must not hide every metric
                warnings.warn(
                    f"contextlens: the metric plugin {entry.name!r} ({entry.value}) failed "
                    f"to load: {type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )


def registered() -> dict[str, MetricInfo]:
    """Every registered metric by name, in name order."""
    _load()
    with _lock:
        return dict(sorted(_registry.items()))


def names() -> list[str]:
    """The registered metric names."""
    return list(registered())


def get(name: str) -> MetricInfo:
    """The metric registered as ``name``; :class:`UnknownMetricError` lists the known names."""
    known = registered()
    if name not in known:
        raise UnknownMetricError(f"unknown metric {name!r}; choose from {', '.join(known)}")
    return known[name]


def create(name: str, **options: Any) -> Metric[Any]:
    """A new instance of the metric ``name`` (``options`` go to its factory)."""
    return get(name).factory(**options)


def unregister(name: str) -> None:
    """Remove ``name`` from the registry (for tests and interactive sessions)."""
    with _lock:
        _registry.pop(name, None)
