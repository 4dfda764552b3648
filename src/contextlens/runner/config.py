"""The configuration of a run: one frozen object, built once, logged with the run.

:class:`RunConfig` holds every setting of a run: who judges and embeds, how many calls are
in flight, retries, repeats, the cache, where results go, the run store, the statistics.
``evaluate``, ``calibrate``, the command and the Ray executor all build one from their
arguments and pass it down, so the settings and their defaults are said once, and nothing a
run sets changes another run (``max_concurrency`` bounds this run's limiters only; see
:class:`~contextlens.engine.limiter.Limits`). :meth:`RunConfig.describe` is what
``summary.json`` and the run store record of it (a typed
:class:`~contextlens.results.RecordedConfig`); ``data_file`` and ``command`` go into the run's
:class:`~contextlens.provenance.Provenance`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextlens.engine.limiter import Limits
from contextlens.engine.retry import RetryPolicy
from contextlens.fields import closest
from contextlens.judges.resolve import as_spec
from contextlens.judges.spec import OFFLINE, JudgeSpec
from contextlens.provenance import DataFile
from contextlens.redact import redact
from contextlens.results import RecordedConfig
from contextlens.runner.folder import RunFolder
from contextlens.stats import StatisticalMode, checked_mode

__all__ = ["ProgressCallback", "RunConfig", "RunOptions"]

ProgressCallback = Callable[[int, int | None, float], None]
"""Called after each case, and every second while none completes, with (cases done, cases
in all or None, seconds since the start)."""


class RunConfig(BaseModel):
    """Every setting of one run.

    ``judge``: the judge of every metric that has none of its own (a spec string, parsed
    here into a :class:`~contextlens.judges.spec.JudgeSpec`, ``"offline"``, a Judge, a
    ChatBackend, a LangChain chat model); None is offline. ``embedder``: the same for the
    embedder (None: the bundled one). ``max_concurrency``: judge calls in flight at most per
    backend, for this run (None: each backend's own bound). ``retry``: how a call is retried
    (None: each backend's defaults). ``repeats``: judge each item this many times.
    ``cache``: True (the user cache folder), False or ``"off"`` (none, as the CLI's
    ``--cache off``), a path, or a cache object. ``out``: the
    folder whose ``OUT/<run id>/`` the run writes into (or a :class:`RunFolder`).
    ``store``: the run store the command records the run in (None: the default one; False:
    none). ``thresholds``: pass marks by metric name (an item passes at a score of the mark
    or more; a metric not named keeps its own ``threshold``, else 0.5).
    ``max_cost``: USD the run's judge calls may cost at most (None: no cap; see
    :mod:`contextlens.engine.budget`).
    ``triage``: the calibrated offline scorer decides the items of a metric that has a
    triage band whose offline probability is outside it, the judge the rest (see
    :meth:`~contextlens.metrics.metric.Metric.score`); a metric without a band is judged
    as usual, and its summary says so.
    ``batch``: the judge calls go through the judge's provider's batch API, at its batch
    price (see :mod:`contextlens.judges.batching`); the run waits for the batches.
    ``statistical_mode``: the aggregate's interval (None: ``BayesianMode()``).
    ``keep_results``: keep every item in memory (None: when there is no ``out``).
    ``progress``: a bar on stderr (None: when stderr is a terminal), or a
    :data:`ProgressCallback`. ``name`` and ``tags`` (``{"branch": "main"}``) are recorded
    with the run, to find and follow it (``contextlens runs``, ``contextlens trend``).
    ``data_file``: the file the cases were read from (a path, hashed here, or a
    :class:`~contextlens.provenance.DataFile`), recorded in the run's provenance, so a
    comparison says when two runs read different data. ``command``: the command line that
    started the run (the command sets it; its secrets masked here), None from Python.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    judge: Any = None
    embedder: Any = None
    max_concurrency: int | None = Field(default=None, ge=1)
    retry: RetryPolicy | None = None
    repeats: int = Field(default=1, ge=1)
    cache: Any = True
    out: Path | RunFolder | None = None
    store: Path | bool | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    triage: bool = False
    batch: bool = False
    statistical_mode: StatisticalMode | None = None
    keep_results: bool | None = None
    progress: bool | ProgressCallback | None = None
    name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    data_file: DataFile | None = None
    command: str | None = None

    @field_validator("cache")
    @classmethod
    def _cache_off(cls, value: Any) -> Any:
        return False if isinstance(value, str) and value.strip().lower() == "off" else value

    @field_validator("statistical_mode")
    @classmethod
    def _estimating_mode(cls, value: StatisticalMode | None) -> StatisticalMode | None:
        return None if value is None else checked_mode(value)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError("a run name is a non-empty text without surrounding spaces")
        return value

    @field_validator("tags")
    @classmethod
    def _plain_tags(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key.strip() or "=" in key:
                raise ValueError(f"tag {key!r}: a tag key is a non-empty text without '='")
        return value

    @field_validator("judge", mode="before")
    @classmethod
    def _parsed_judge(cls, value: Any) -> Any:
        """A spec string is parsed once, here: a bad one is refused before any work."""
        return as_spec(value)

    @field_validator("data_file", mode="before")
    @classmethod
    def _hashed(cls, value: Any) -> Any:
        """A path is read and hashed once, here: a file that cannot be read is said now."""
        return DataFile.of(value) if isinstance(value, (str, os.PathLike)) else value

    @field_validator("command")
    @classmethod
    def _masked(cls, value: str | None) -> str | None:
        return None if value is None else redact(value)

    @field_validator("out", mode="before")
    @classmethod
    def _out_path(cls, value: Any) -> Any:
        return Path(value) if isinstance(value, (str, os.PathLike)) else value

    @classmethod
    def of(cls, config: RunConfig | None = None, **options: Any) -> RunConfig:
        """``config`` with ``options`` over it (a fresh one without ``config``); an unknown
        option is a ``TypeError`` naming the closest one."""
        for key in options:
            if key not in cls.model_fields:
                near = closest(key, cls.model_fields)
                hint = f"; did you mean {near!r}?" if near else ""
                raise TypeError(f"unknown run option {key!r}{hint}")
        base = {k: getattr(config, k) for k in cls.model_fields} if config is not None else {}
        try:
            return cls(**{**base, **options})
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{key}: {first['msg']} (got {first.get('input')!r:.60})") from None

    @property
    def limits(self) -> Limits:
        """Where this run's judges take their limiters."""
        return Limits(self.max_concurrency)

    @property
    def folder(self) -> RunFolder | None:
        """The run's own folder (a new run id under ``out``), or None without ``out``."""
        if isinstance(self.out, Path):
            return RunFolder(self.out)
        return self.out

    def describe(self) -> RecordedConfig:
        """The settings as ``summary.json`` and the run store record them: the judge and
        embedder by name (secrets masked), the rest as given (the data file and the command
        are the run's provenance, not recorded here)."""
        mode = self.statistical_mode
        return RecordedConfig(
            judge=judge_label(self.judge),
            embedder=_label(self.embedder, "minilm"),
            max_concurrency=self.max_concurrency,
            retry=None if self.retry is None else _plain(vars(self.retry)),
            repeats=self.repeats,
            thresholds={str(k): v for k, v in self.thresholds.items()},
            max_cost=self.max_cost,
            triage=self.triage,
            batch=self.batch,
            cache=_label(self.cache, "default") if self.cache is not True else "default",
            out=None if self.out is None else str(getattr(self.out, "out", self.out)),
            statistical_mode=None if mode is None else repr(mode),
            name=self.name,
            tags=dict(self.tags),
        )


class RunOptions(TypedDict, total=False):
    """The keyword arguments ``evaluate`` and ``calibrate`` take for a run: the fields of
    :class:`RunConfig`."""

    judge: Any
    embedder: Any
    max_concurrency: int | None
    retry: RetryPolicy | None
    repeats: int
    cache: Any
    out: str | os.PathLike[str] | RunFolder | None
    store: Path | bool | None
    thresholds: dict[str, float]
    max_cost: float | None
    triage: bool
    batch: bool
    statistical_mode: StatisticalMode | None
    keep_results: bool | None
    progress: bool | ProgressCallback | None
    name: str | None
    tags: dict[str, str]
    data_file: str | os.PathLike[str] | DataFile | None
    command: str | None


def judge_label(judge: Any) -> str:
    """How a run's judge is shown: ``offline``, a spec, or the object's name."""
    if judge is None or judge == OFFLINE:
        return OFFLINE
    if isinstance(judge, JudgeSpec):
        return judge.redacted()
    return _label(judge, OFFLINE)


def _label(obj: Any, default: str) -> str:
    if obj is None:
        return default
    if isinstance(obj, (str, os.PathLike, bool)):
        return str(obj)
    name = getattr(obj, "name", None)
    if isinstance(name, str):
        model = getattr(obj, "model", None)
        return f"{name}:{model}" if isinstance(model, str) else name
    return type(obj).__name__


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if isinstance(v, (int, float, str, bool, type(None)))}
