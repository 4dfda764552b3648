"""What a run records of each metric's configuration, so two runs can be told apart: the
metric's own settings and a digest of its prompts and offline models (its pass mark, which
the run may set, is the summary's ``threshold``)."""

from __future__ import annotations

import enum
import hashlib
import inspect
import json
import sys
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from contextlens.metrics.metric import Metric, ProtocolMetric

__all__ = ["MetricSettings", "settings_of"]

#: Attributes that are not settings: who judges and embeds is recorded apart.
_NOT_SETTINGS = frozenset({"judge", "embedder", "model", "name"})
_PROMPTS = "contextlens.metrics.prompts"
#: A setting whose JSON is longer than this is recorded by its digest.
_LONGEST = 200
_WEIGHTS = "contextlens.offline"


class MetricSettings(BaseModel):
    """One metric's configuration in a run.

    ``values``: its settings as JSON (thresholds, modes, limits, label); ``prompts``: a
    digest of the prompt files it sends to a judge, and of the offline models it scores
    with when it has no judge (16 hex digits; None when it has neither).
    """

    values: dict[str, Any] = Field(default_factory=dict)
    prompts: str | None = None

    @property
    def fingerprint(self) -> str:
        """A digest of ``values`` alone (16 hex digits)."""
        text = json.dumps(self.values, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def settings_of(metric: Metric[Any]) -> MetricSettings:
    """The settings of ``metric``: its config as JSON (who judges and embeds left out), and
    the digest of the prompt files and offline models it declares (``prompts``,
    ``offline_models``). A metric of the older protocol records its public attributes and
    the digest of its module's source."""
    if isinstance(metric, ProtocolMetric):
        inner = metric.inner
        values = {
            k: _short(_plain(v))
            for k, v in sorted(vars(inner).items())
            if not k.startswith("_") and k not in _NOT_SETTINGS
        }
        return MetricSettings(values=values, prompts=_source_digest(type(inner).__module__))
    values = {k: _short(_plain(v)) for k, v in sorted(metric.config.model_dump().items())}
    return MetricSettings(
        values=values, prompts=_digest(type(metric).prompts, type(metric).offline_models)
    )


def _short(value: Any) -> Any:
    """A long setting (few-shot examples, a template) as the digest of its JSON."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if len(text) <= _LONGEST:
        return value
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """``value`` as JSON that is the same for equal settings in any process."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    shown = repr(value)
    return type(value).__name__ if " at 0x" in shown else shown


@cache
def _digest(prompts: tuple[str, ...], models: tuple[str, ...]) -> str | None:
    """Digest of the prompt files (in ``contextlens/metrics/prompts/``) and the offline
    model files (under ``contextlens/offline/``) a metric declares; None when it declares
    neither. A file a metric does not declare never changes its digest."""
    if not prompts and not models:
        return None
    digest = hashlib.sha256()
    for package, names in ((_PROMPTS, prompts), (_WEIGHTS, models)):
        for name in sorted(names):
            digest.update(name.encode() + b"\0" + _read(package, name))
    return digest.hexdigest()[:16]


def _read(package: str, name: str) -> bytes:
    """A packaged file's bytes (``name`` may hold ``/``)."""
    entry = resources.files(package)
    for part in name.split("/"):
        entry = entry.joinpath(part)
    return entry.read_bytes()


@cache
def _source_digest(module: str) -> str | None:
    """Digest of the source of a metric module defined outside contextlens (its prompts
    live there); None when it cannot be read."""
    source = _source(module)
    return hashlib.sha256(source).hexdigest()[:16] if source is not None else None


def _source(module: str) -> bytes | None:
    """The source of a metric module defined outside contextlens (its prompts live there)."""
    loaded = sys.modules.get(module)
    try:
        path = inspect.getsourcefile(loaded) if loaded is not None else None
    except TypeError:
        return None
    return Path(path).read_bytes() if path and Path(path).is_file() else None
