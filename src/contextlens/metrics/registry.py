r"""The metric registry: every metric by its name, for the CLI, ``calibrate``, the pytest
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

**One name per metric.** The registered name is the key of every result, summary, gate,
threshold, comparison and calibration; the decorator sets it as the class's ``name``.
``aliases`` (a seed library's class or display name) and the spellings that differ only in
case, ``-``, ``_`` or spaces resolve to it (:func:`resolve`); any other name is an
:class:`UnknownMetricError` with the closest known name. Two instances of one metric in a run
carry distinct ``label``\ s and go by ``NAME:LABEL`` (:func:`key_of`, :func:`match`).

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
from contextlens.fields import (
    INTERACTION_FIELDS,
    SESSION_FIELDS,
    TEST_CASE_FIELDS,
    FieldTable,
    Requirement,
    as_requires,
    closest,
)
from contextlens.metrics.metric import Metric
from contextlens.schemas import Dataset, MetricDetails, MetricKey, ModelTestCase

__all__ = [
    "MetricInfo",
    "UnknownMetricError",
    "create",
    "get",
    "key_of",
    "match",
    "metric",
    "name_of",
    "names",
    "registered",
    "resolve",
]

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
    field name or a tuple of alternatives (``contextlens schema`` shows both); ``aliases``
    the other names it answers to; ``details`` the type of its results' details.
    """

    name: str
    factory: Callable[..., Any]
    case_type: type
    description: str
    reads: tuple[str, ...]
    requires: tuple[Requirement, ...] = ()
    aliases: tuple[str, ...] = ()
    details: type[MetricDetails] = MetricDetails


_registry: dict[str, MetricInfo] = {}
_lock = threading.RLock()
_loaded = False


def _folded(name: str) -> str:
    """A name as it compares: case, ``-``, ``_`` and spaces do not matter."""
    return "".join(ch for ch in name.lower() if ch not in "-_ ")


def metric(
    name: str,
    *,
    case_type: type | None = None,
    reads: Sequence[str] = (),
    requires: Sequence[str | Sequence[str]] | None = None,
    description: str | None = None,
    aliases: Sequence[str] = (),
) -> Callable[[F], F]:
    """Register the decorated class (or factory function) under ``name``.

    ``case_type``, ``requires`` and ``description`` default to the class's ``case_type``
    and ``requires`` attributes and the first line of its docstring. ``requires`` given here
    is set as the class's ``requires`` attribute, which the runner reads (a factory
    function's metric declares its own); a class gets ``name`` as its ``name``. ``aliases``
    are other names it answers to (a seed library's class name). A name can be registered
    once; registering another object under a taken name or alias raises ``ValueError``.
    """
    if not name or name != name.strip() or " " in name or MetricKey.SEPARATOR in name:
        raise ValueError(
            f"metric name {name!r}: use a non-empty name without spaces or {MetricKey.SEPARATOR!r}"
        )

    def register(factory: F) -> F:
        kind = case_type or getattr(factory, "case_type", None)
        if not isinstance(kind, type):
            raise TypeError(f"metric {name!r}: give case_type= or a class attribute case_type")
        try:
            needs = as_requires(getattr(factory, "requires", ()) if requires is None else requires)
        except TypeError as exc:
            raise TypeError(f"metric {name!r}: {exc}") from None
        _check_fields(name, kind, needs, reads)
        if isinstance(factory, type):
            factory.name = name  # type: ignore[attr-defined]
            factory.requires = needs  # type: ignore[attr-defined]
            if reads or not getattr(factory, "reads", ()):
                factory.reads = tuple(reads)  # type: ignore[attr-defined]
        doc = (factory.__doc__ or "").strip().splitlines()
        info = MetricInfo(
            name=name,
            factory=factory,
            case_type=kind,
            description=description or (doc[0] if doc else ""),
            reads=tuple(reads),
            requires=needs,
            aliases=tuple(aliases),
            details=getattr(factory, "details_type", MetricDetails),
        )
        with _lock:
            known = _registry.get(name)
            if known is not None and known.factory is not factory:
                raise ValueError(f"metric {name!r} is already registered by {known.factory!r}")
            for other in _registry.values():
                if other.name == name:
                    continue
                taken = {_folded(n) for n in (other.name, *other.aliases)}
                clash = [n for n in (name, *aliases) if _folded(n) in taken]
                if clash:
                    raise ValueError(f"metric {name!r}: {clash[0]!r} names {other.name!r} already")
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


def _tables(kind: type) -> list[FieldTable]:
    """The field tables a case of ``kind`` is made of (none for a case type of its own)."""
    if issubclass(kind, ModelTestCase):
        return [TEST_CASE_FIELDS]
    if issubclass(kind, Dataset):
        return [SESSION_FIELDS, INTERACTION_FIELDS]
    return []


def _check_fields(
    name: str, kind: type, needs: Sequence[Requirement], reads: Sequence[str]
) -> None:
    """A metric's ``requires`` and ``reads`` name fields of its case type (ValueError
    naming the first that does not, with the closest field)."""
    tables = _tables(kind)
    if not tables:
        return
    wanted = [n for need in needs for n in ((need,) if isinstance(need, str) else need)]
    for what, field in [*(("requires", n) for n in wanted), *(("reads", n) for n in reads)]:
        if not any(t.get(field) is not None for t in tables):
            why = tables[0].unknown(field) if len(tables) == 1 else _unknown(field, tables)
            raise ValueError(
                f"metric {name!r}: {what} {field!r}, which is no field of a {kind.__name__}: {why}"
            )


def _unknown(field: str, tables: Sequence[FieldTable]) -> str:
    known = sorted({n for t in tables for n in t.names})
    near = closest(field, known)
    return f"did you mean {near!r}?" if near else f"the fields are {', '.join(known)}"


def registered() -> dict[str, MetricInfo]:
    """Every registered metric by name, in name order."""
    _load()
    with _lock:
        return dict(sorted(_registry.items()))


def names() -> list[str]:
    """The registered metric names."""
    return list(registered())


def get(name: str) -> MetricInfo:
    """The metric ``name`` stands for (see :func:`resolve`)."""
    return resolve(name)


def resolve(name: str) -> MetricInfo:
    """The metric registered as ``name``, or answering to it: one of its aliases, or a
    spelling that differs only in case, ``-``, ``_`` or spaces (``context_precision``,
    ``ContextPrecision``). :class:`UnknownMetricError` names the closest metric else."""
    known = registered()
    if name in known:
        return known[name]
    folded = _folded(name)
    for info in known.values():
        if folded in {_folded(n) for n in (info.name, *info.aliases)}:
            return info
    names = {n: info.name for info in known.values() for n in (info.name, *info.aliases)}
    near = closest(name, names)
    hint = f"did you mean {names[near]!r}? " if near else ""
    raise UnknownMetricError(f"unknown metric {name!r}; {hint}choose from {', '.join(known)}")


def create(name: str, **options: Any) -> Any:
    """A new instance of the metric ``name`` (``options`` go to its factory): a
    :class:`~contextlens.metrics.metric.Metric`, or what a plugin's factory makes."""
    return resolve(name).factory(**options)


def name_of(obj: Any) -> str:
    """The registered name of a metric object: that of its class, else its own ``name``."""
    if isinstance(obj, Metric):
        return obj.name
    known = registered()
    for info in known.values():
        factory = info.factory
        if isinstance(factory, type) and isinstance(obj, factory):
            return info.name
    own = getattr(obj, "name", None)
    if not isinstance(own, str) or not own:
        raise TypeError(f"metric {obj!r} has no name")
    return own


def key_of(obj: Any) -> MetricKey:
    """The key ``obj``'s results go by: its registered name, with its ``label`` if any."""
    label = getattr(obj, "label", None)
    return MetricKey.of(name_of(obj), label if isinstance(label, str) else None)


def details_type(name: str) -> type[MetricDetails]:
    """The details model of the metric ``name`` (the base model for one not registered)."""
    info = registered().get(MetricKey(name).name)
    return info.details if info is not None else MetricDetails


def match(given: str, keys: Sequence[str], *, what: str = "metric") -> MetricKey:
    """The one of ``keys`` (a run's metric keys) that ``given`` names.

    ``given`` is a key (``context-precision``, ``context-precision:strict``) or any name
    :func:`resolve` takes (``context_precision_metric``). A name the run does not measure,
    or one that names several of its keys (instances with labels), is an
    :class:`UnknownMetricError` saying which keys there are: never a prefix match.
    """
    run_keys = [MetricKey(k) for k in keys]
    if given in run_keys:
        return MetricKey(given)
    wanted = MetricKey(given)
    try:
        name = resolve(wanted.name).name
    except UnknownMetricError:
        folded = _folded(wanted.name)  # a metric object of one's own, not registered
        found = [k.name for k in run_keys if _folded(k.name) == folded]
        if not found:
            raise
        name = found[0]
    label = wanted.label
    found_keys = [k for k in run_keys if k.name == name and (label is None or k.label == label)]
    listed = ", ".join(run_keys) or "none"
    if not found_keys:
        raise UnknownMetricError(
            f"{what} {given!r} names {MetricKey.of(name, label)!r}, which this run does not "
            f"measure (it measures: {listed})"
        )
    if len(found_keys) > 1:
        raise UnknownMetricError(
            f"{what} {given!r} is ambiguous: this run has {', '.join(found_keys)}; name one"
        )
    return found_keys[0]


def unregister(name: str) -> None:
    """Remove ``name`` from the registry (for tests and interactive sessions)."""
    with _lock:
        _registry.pop(name, None)
