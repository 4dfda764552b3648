"""The metrics of a run, each with its key and the services it runs on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextlens.embeddings.adapters import as_embedder
from contextlens.embeddings.base import Embedder
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.engine.cache import Cache, NullCache
from contextlens.engine.limiter import Limits
from contextlens.engine.retry import RetryPolicy
from contextlens.judges.base import Judge
from contextlens.judges.llm import LLMJudge
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics import registry
from contextlens.metrics.base import DEFAULT_PASS, Services, Triage
from contextlens.metrics.claims import case_tools
from contextlens.metrics.metric import Metric, ProtocolMetric
from contextlens.runner.dry_run import DryRunJudge
from contextlens.runner.gates import pass_marks_for
from contextlens.schemas import MetricKey

__all__ = ["NO_CHUNKS", "BoundMetric", "as_metric", "bind_metrics", "checked_metrics"]


def as_metric(obj: Any) -> Metric[Any]:
    """The metric ``obj`` stands for: a metric's name (any name
    :func:`~contextlens.metrics.registry.resolve` takes), a metric, a seed-style facade
    (its ``metric`` attribute is the metric it wraps), or an object written to the older
    metric protocol (run through :class:`~contextlens.metrics.metric.ProtocolMetric`)."""
    if isinstance(obj, str):
        obj = registry.create(obj)
    inner = getattr(obj, "metric", None)
    if isinstance(inner, Metric):
        return inner
    if isinstance(obj, Metric):
        return obj
    if callable(getattr(obj, "score", None)) and isinstance(getattr(obj, "case_type", None), type):
        return ProtocolMetric.of(obj, registry.name_of(obj))
    raise TypeError(
        f"not a metric: {obj!r}; pass a metric name ({', '.join(registry.names())}), a "
        "metric object or one of the seed metric classes"
    )


def checked_metrics(metrics: Sequence[Any]) -> list[Metric[Any]]:
    """The metric cores of a run; a ValueError when there are none or two share a key."""
    if not metrics:
        raise ValueError("no metrics given")
    cores = [as_metric(m) for m in metrics]
    seen: set[MetricKey] = set()
    for core in cores:
        key = registry.key_of(core)
        if key in seen:
            raise ValueError(
                f"two metrics of this run go by {key!r}; give each its own label "
                f"(e.g. label='strict') to run them side by side"
            )
        seen.add(key)
    return cores


@dataclass(frozen=True)
class BoundMetric:
    """A metric of a run: its key, the services it runs on, its pass mark (an item passes
    at a score of it or more), and whether it reads the retrieved chunks (a case without any
    is then not applicable)."""

    metric: Metric[Any]
    key: MetricKey
    services: Services
    pass_mark: float | None = DEFAULT_PASS
    reads_chunks: bool = False

    @property
    def judge_name(self) -> str | None:
        """The judge the metric used: its name, ``offline``, or None when it asks none."""
        if self.services.judge is not None:
            return self.services.judge.name
        return "offline" if self.metric.uses_judge else None

    def applies_to(self, case: Any) -> bool:
        """Whether the metric scores cases like ``case``."""
        return isinstance(case, self.metric.case_type)

    def not_applicable(self, case: Any) -> str | None:
        """Why the metric does not apply to ``case`` although it takes its kind: a metric
        that reads the retrieved chunks and a case that has none (a chit-chat turn, a
        retriever that found nothing). None when it applies."""
        if not self.reads_chunks:
            return None
        chunks = getattr(case, "retrieval_context", None)
        if chunks is None or any(isinstance(c, str) and c.strip() for c in chunks):
            return None
        if "tools_called" in self.metric.reads and case_tools(case):
            return None  # the tool outputs are its evidence
        return NO_CHUNKS


#: Why a case without retrieved chunks is not scored by a metric that reads them.
NO_CHUNKS = "not applicable: no retrieved context"


def bind_metrics(
    metrics: Sequence[Metric[Any]],
    *,
    judge: Any,
    embedder: Any,
    cache: Cache | NullCache,
    limits: Limits,
    retry: RetryPolicy | None = None,
    thresholds: Mapping[str, float] | None = None,
    preflight: bool = True,
    triage: bool = False,
    batch: bool = False,
) -> list[BoundMetric]:
    """Each metric with its services: its own judge and embedder if it has them, else the
    run's; every judge takes its limiter from ``limits`` and its replies from ``cache``.
    A metric's pass mark is ``thresholds[its name]`` (any name of it), else its own
    ``threshold``, else its :meth:`~contextlens.metrics.metric.Metric.pass_mark` (None: no
    pass mark, for a metric whose score is not a probability). The ``preflight`` of each
    judge's backend runs once here, before any call (unless ``preflight`` is False). With
    ``triage``, a judged metric that has a triage band gets a
    :class:`~contextlens.metrics.base.Triage` that counts the calls it saves. With ``batch``,
    every judge's calls go through its provider's batch API."""
    keys = [registry.key_of(m) for m in metrics]
    marks = pass_marks_for(thresholds or {}, keys)

    def judge_for(choice: Any) -> Judge | None:
        return resolve_judge(choice, limits=limits, cache=cache, retry=retry, batch=batch)

    def embedder_for(choice: Any) -> Embedder:
        return CachedEmbedder(as_embedder(choice), cache)

    run_judge = judge_for(judge)
    run_embedder = embedder_for(embedder)
    checked: set[int] = set()
    bound = []
    for metric in metrics:
        own, own_emb = metric.judge, metric.embedder
        judge_obj = run_judge if own is None else judge_for(own)
        if metric.uses_judge and isinstance(judge_obj, LLMJudge) and id(judge_obj) not in checked:
            checked.add(id(judge_obj))
            if preflight:  # a judge that cannot work says so now
                judge_obj.preflight()
        key = registry.key_of(metric)
        judged = judge_obj if metric.uses_judge else None
        counter = (
            DryRunJudge(judged, records=False)
            if triage and judged is not None and metric.triage_band() is not None
            else None
        )
        bound.append(
            BoundMetric(
                metric,
                key,
                Services(
                    judge=judged,
                    embedder=run_embedder if own_emb is None else embedder_for(own_emb),
                    triage=None if counter is None else Triage(counter),
                ),
                pass_mark=marks.get(key, metric.pass_mark()),
                reads_chunks="retrieval_context" in metric.reads,
            )
        )
    return bound
