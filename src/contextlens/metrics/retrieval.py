"""Retrieval: the ranked chunk ids a retriever returned against the ids known to be relevant.

No judge and no embedder: every measure is computed from ``retrieved_ids`` (best first) and
``relevant_ids`` (a list of relevant ids, each of grade 1, or an object id -> grade for graded
relevance; grade 0 is "judged, not relevant"). With ``R`` the ids whose grade is at least
``relevance_level`` (default 1), ``rel_i`` whether the id at rank ``i`` is in ``R``, ``g_i`` its
grade (0 when unjudged) and ``k`` the cut-off (default 10), as trec_eval defines them:

- ``hit_rate``: 1 when one of the first ``k`` is relevant, else 0 (trec_eval ``success@k``);
- ``recall``: relevant ids among the first ``k`` / ``|R|``;
- ``precision``: relevant ids among the first ``k`` / ``k`` (a list shorter than ``k`` is not
  rewarded for it);
- ``mrr``: ``1 / rank`` of the first relevant id within the first ``k`` (0 when none); the mean
  over cases is the mean reciprocal rank;
- ``ndcg``: ``DCG@k / IDCG@k`` with ``DCG@k = sum_{i<=k} g_i / log2(i + 1)`` (linear gain) and
  ``IDCG@k`` the DCG of the judged ids sorted by grade;
- ``map``: average precision at ``k``, ``sum_{i<=k, rel_i} precision@i / |R|``; the mean over
  cases is MAP.

**One metric, every measure.** ``details`` hold all six at ``k``; the score is one of them,
``measure`` (default ``"ndcg"``): nDCG is the one that uses both the order of the list and the
grades, it is in [0, 1], and it is the measure TREC Deep Learning and BEIR report. To gate on,
compare or summarise another measure, run another instance with a label
(``RetrievalMetric(measure="recall", k=5, label="recall@5")``). A case whose judgements have no
relevant id (none with a grade of ``relevance_level`` or more) fails with that reason: recall,
MRR, nDCG and AP are undefined for it (trec_eval leaves such a query out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from contextlens.errors import InputError
from contextlens.metrics.base import Services
from contextlens.metrics.config import MetricConfig
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.schemas import MetricDetails, ModelTestCase

__all__ = [
    "MEASURES",
    "Measure",
    "RetrievalDetails",
    "RetrievalMeasures",
    "RetrievalMetric",
    "grades_of",
    "retrieval_measures",
]

Measure = Literal["hit_rate", "recall", "precision", "mrr", "ndcg", "map"]
MEASURES: tuple[str, ...] = ("hit_rate", "recall", "precision", "mrr", "ndcg", "map")
_SHOWN = {
    "hit_rate": "hit@{k}",
    "recall": "recall@{k}",
    "precision": "precision@{k}",
    "mrr": "MRR@{k}",
    "ndcg": "nDCG@{k}",
    "map": "AP@{k}",
}
#: Relevant ids not retrieved that a result names (its details hold the count).
MAX_MISSING = 20


class RetrievalMeasures(BaseModel):
    """Every measure of one ranked list at cut-off ``k``."""

    k: int
    hit_rate: float
    recall: float
    precision: float
    mrr: float
    ndcg: float
    map: float


class RetrievalDetails(MetricDetails):
    """A retrieval result's details: every measure at ``k``, which one is the score, and the
    counts they come from."""

    measure: str | None = None
    measures: RetrievalMeasures | None = None
    relevance_level: float | None = None
    retrieved: int | None = None
    relevant: int | None = None
    relevant_retrieved: int | None = None
    first_relevant_rank: int | None = None
    missing: list[str] | None = None


def grades_of(relevant: Sequence[str] | Mapping[str, float]) -> dict[str, float]:
    """Judgements as id -> grade: a list gives each id grade 1."""
    if isinstance(relevant, Mapping):
        return {str(k): float(v) for k, v in relevant.items()}
    return {str(ident): 1.0 for ident in relevant}


def retrieval_measures(
    retrieved: Sequence[str],
    relevant: Sequence[str] | Mapping[str, float],
    k: int,
    relevance_level: float = 1.0,
) -> RetrievalMeasures:
    """The six measures of ``retrieved`` (best first) at ``k`` (see the module).

    Raises ``ValueError`` when no id of ``relevant`` has a grade of ``relevance_level`` or
    more: the measures that divide by the relevant ids are then undefined.
    """
    grades = grades_of(relevant)
    wanted = {ident for ident, grade in grades.items() if grade >= relevance_level}
    if not wanted:
        raise ValueError(
            f"no relevant id (none with a grade >= {relevance_level:g}): recall, MRR, nDCG and "
            "average precision are undefined"
        )
    top = list(retrieved)[:k]
    hits = 0
    precision_sum = 0.0
    first: int | None = None
    dcg = 0.0
    for rank, ident in enumerate(top, 1):
        gain = max(grades.get(ident, 0.0), 0.0)
        dcg += gain / math.log2(rank + 1)
        if ident in wanted:
            hits += 1
            precision_sum += hits / rank
            first = rank if first is None else first
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))
    return RetrievalMeasures(
        k=k,
        hit_rate=1.0 if hits else 0.0,
        recall=hits / len(wanted),
        precision=hits / k,
        mrr=1.0 / first if first is not None else 0.0,
        ndcg=dcg / idcg if idcg > 0 else 0.0,
        map=precision_sum / len(wanted),
    )


class RetrievalConfig(MetricConfig):
    """The retrieval metric's settings.

    ``k``: the cut-off of every measure (an integer >= 1; default 10). ``measure``: the
    measure that is the score: ``"ndcg"`` (default), ``"hit_rate"``, ``"recall"``,
    ``"precision"``, ``"mrr"`` or ``"map"``; ``details.measures`` holds all six.
    ``relevance_level``: the grade from which a judged id counts as relevant for the binary
    measures (default 1, as trec_eval's); nDCG uses the grades themselves. ``threshold``:
    the pass mark of the score (default 0.5).
    """

    threshold: float | None = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    k: int = 10
    measure: Measure = "ndcg"
    relevance_level: float = 1.0

    @field_validator("k", mode="before")
    @classmethod
    def _cut_off(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"k must be an integer >= 1, got {value!r}")
        return value

    @field_validator("measure", mode="before")
    @classmethod
    def _measure(cls, value: Any) -> Any:
        if value not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {value!r}")
        return value

    @field_validator("relevance_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not value > 0 or not math.isfinite(value):
            raise ValueError(f"relevance_level must be a number > 0, got {value!r}")
        return float(value)


@metric(
    "retrieval",
    aliases=("RetrievalMetric",),
    reads=("retrieved_ids", "relevant_ids"),
    requires=("retrieved_ids", "relevant_ids"),
)
class RetrievalMetric(Metric[ModelTestCase]):
    """Hit rate, recall, precision, MRR, nDCG and MAP at k from labelled chunk ids; no judge.

    Settings: :class:`RetrievalConfig`.
    """

    case_type = ModelTestCase
    details_type = RetrievalDetails
    config_type = RetrievalConfig
    uses_judge = False
    config: RetrievalConfig

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        """The measures of one case; no judge, no embedding."""
        for name in ("retrieved_ids", "relevant_ids"):
            if getattr(case, name) is None:
                raise InputError(f"the retrieval metric needs {name}", field=name)
        assert case.retrieved_ids is not None and case.relevant_ids is not None
        retrieved = case.retrieved_ids
        grades = grades_of(case.relevant_ids)
        cfg = self.config
        try:
            found = retrieval_measures(retrieved, grades, cfg.k, cfg.relevance_level)
        except ValueError as exc:
            details = RetrievalDetails(measure=cfg.measure, relevance_level=cfg.relevance_level)
            raise ScoreFailed(str(exc), details) from None
        wanted = [i for i, g in grades.items() if g >= cfg.relevance_level]
        top = set(retrieved[: cfg.k])
        missing = [i for i in wanted if i not in top]
        first = next(
            (rank for rank, i in enumerate(retrieved[: cfg.k], 1) if i in set(wanted)), None
        )
        details = RetrievalDetails(
            measure=cfg.measure,
            measures=found,
            relevance_level=cfg.relevance_level,
            retrieved=len(retrieved),
            relevant=len(wanted),
            relevant_retrieved=len(wanted) - len(missing),
            first_relevant_rank=first,
            missing=missing[:MAX_MISSING] or None,
        )
        score = float(getattr(found, cfg.measure))
        return Score(score, self._reason(found, details, missing), details)

    def _reason(
        self, found: RetrievalMeasures, details: RetrievalDetails, missing: list[str]
    ) -> str:
        k = self.config.k
        parts = [
            f"{_SHOWN[self.config.measure].format(k=k)} {getattr(found, self.config.measure):.3f}"
        ]
        others = ", ".join(
            f"{_SHOWN[m].format(k=k)} {getattr(found, m):.3f}"
            for m in MEASURES
            if m != self.config.measure
        )
        text = f"{parts[0]} (the score); {others}. "
        text += f"{details.relevant_retrieved} of {details.relevant} relevant id(s) in the top {k}"
        if details.first_relevant_rank is not None:
            text += f", the first at rank {details.first_relevant_rank}"
        text += "."
        if missing:
            shown = ", ".join(repr(m) for m in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            text += f" Not in the top {k}: {shown}{more}."
        return text
