"""The metric contract: a :class:`Metric` is a config model and two hooks.

A metric declares what it is as class variables (its name, the case type it scores, the
type of its details, the fields it requires and reads, the prompt files and offline models
it uses, whether it asks a judge) and what it is set to as a frozen pydantic config
(:class:`~contextlens.metrics.config.MetricConfig` and its subclasses: threshold, label,
judge, embedder, size limits, plus the metric's own fields). It writes
:meth:`Metric.judged` and :meth:`Metric.offline`, each returning a :class:`Score`;
:meth:`Metric.score`, written once here, forks between them and turns a size limit, a
judge's failure or a :class:`ScoreFailed` into a failed result. The runner alone keys
results and decides pass or fail.

Metrics written to the older protocol (an object with ``name``, ``case_type`` and an async
``score(case, services)``) run through :class:`ProtocolMetric`, the one adapter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, final

from pydantic import ValidationError

from contextlens.errors import InputError, JudgeError
from contextlens.fields import Requirement, as_requires
from contextlens.metrics.base import DEFAULT_PASS, OverBudget, ReaderDetails, Services, raw_reply
from contextlens.metrics.config import EmbeddingConfig, JudgedConfig, MetricConfig
from contextlens.schemas import MetricDetails, MetricResult, TriageBand, TriageDecision

if TYPE_CHECKING:
    from typing_extensions import Self

    from contextlens.judges.base import Judge

__all__ = [
    "Metric",
    "ProtocolMetric",
    "Score",
    "ScoreFailed",
]

C = TypeVar("C")


@dataclass(frozen=True)
class Score:
    """What a metric's hook returns: the score in [0, 1], a reason, the metric's details;
    or no score and why the metric does not apply (``not_applicable``, ``"not applicable:
    ..."``)."""

    value: float | None
    reason: str | None = None
    details: MetricDetails | None = None
    not_applicable: str | None = None

    @classmethod
    def not_applying(
        cls, why: str, reason: str | None = None, details: MetricDetails | None = None
    ) -> Score:
        """No score: the metric does not apply to the case, and ``why``."""
        return cls(None, reason, details, not_applicable=why)


class ScoreFailed(Exception):
    """Raised by a hook: the item fails with this message (and these details)."""

    def __init__(self, message: str, details: MetricDetails | None = None) -> None:
        super().__init__(message)
        self.details = details


class Metric(Generic[C]):
    """A metric: class variables say what it is, ``config`` what it is set to.

    ``score`` may be called by many tasks at once on one object; it changes nothing on
    ``self``. Subclasses write :meth:`judged` (with a judge) and :meth:`offline` (without
    one; the only hook of a metric with ``uses_judge = False``). Settings are given as
    keyword arguments (checked into ``config_type``) or as a ready config.
    """

    #: The registered name: the key of every result (set by the ``@metric`` decorator).
    name: ClassVar[str]
    #: The kind of case scored: a :class:`~contextlens.schemas.ModelTestCase` or a
    #: :class:`~contextlens.schemas.Dataset` session.
    case_type: ClassVar[type]
    details_type: ClassVar[type[MetricDetails]] = MetricDetails
    config_type: ClassVar[type[MetricConfig]] = MetricConfig
    #: The case fields it cannot do without (an entry of several: one of them).
    requires: ClassVar[tuple[Requirement, ...]] = ()
    #: The case fields it uses.
    reads: ClassVar[tuple[str, ...]] = ()
    #: The prompt files it sends a judge (in ``contextlens/metrics/prompts/``).
    prompts: ClassVar[tuple[str, ...]] = ()
    #: The offline weight files it scores with (in ``contextlens/offline/weights/``).
    offline_models: ClassVar[tuple[str, ...]] = ()
    #: False for a metric that never asks a judge (it is given none).
    uses_judge: ClassVar[bool] = True
    #: False for a score that is not a probability (a similarity): no default pass mark.
    score_is_probability: ClassVar[bool] = True

    config: MetricConfig

    def __init__(self, config: MetricConfig | None = None, /, **settings: Any) -> None:
        if config is not None and not isinstance(config, self.config_type):
            raise TypeError(
                f"{type(self).__name__}: settings are keyword arguments (its config is a "
                f"{self.config_type.__name__}); got {config!r} by position"
            )
        if config is None or settings:
            given = {**config.model_dump(), **_excluded(config)} if config is not None else {}
            config = self.checked_config({**given, **settings})
        self.config = config

    @classmethod
    def checked_config(cls, values: Mapping[str, Any]) -> MetricConfig:
        """``values`` as this metric's config; a ValueError names the setting and what it
        takes (a TypeError for a setting it does not have)."""
        try:
            return cls.config_type.model_validate(dict(values))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "config"
            if first["type"] == "extra_forbidden":
                known = ", ".join(cls.config_type.model_fields)
                raise TypeError(
                    f"{cls.__name__}: no setting {where!r}; its settings are {known}"
                ) from None
            original = (first.get("ctx") or {}).get("error")
            if isinstance(original, InputError):  # it names the field itself
                raise original from None
            message = str(first["msg"]).removeprefix("Value error, ")
            if not first["loc"] or message.startswith(where):
                raise ValueError(f"{cls.__name__}: {message}") from None
            given = repr(first.get("input"))
            given = given if len(given) <= 80 else given[:77] + "..."
            raise ValueError(f"{cls.__name__}: {where}: {message}, got {given}") from None

    def replace(self, **settings: Any) -> Self:
        """A copy of this metric with ``settings`` changed (checked as at construction)."""
        values = {**self.config.model_dump(), **_excluded(self.config), **settings}
        return type(self)(self.checked_config(values))

    # --- what the runner reads ------------------------------------------------------------

    @property
    def threshold(self) -> float | None:
        """The metric's own pass mark, or None."""
        return self.config.threshold

    @property
    def label(self) -> str | None:
        return self.config.label

    @property
    def judge(self) -> Any:
        """The metric's own judge choice (None: the run's)."""
        return self.config.judge if isinstance(self.config, JudgedConfig) else None

    @property
    def embedder(self) -> Any:
        """The metric's own embedder choice (None: the run's)."""
        return self.config.embedder if isinstance(self.config, EmbeddingConfig) else None

    def pass_mark(self) -> float | None:
        """The pass mark a run holds it to when the run sets none: its threshold, else
        :data:`DEFAULT_PASS` for a probability and None (no verdict) otherwise."""
        if self.config.threshold is not None:
            return self.config.threshold
        return DEFAULT_PASS if self.score_is_probability else None

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={v!r}"
            for k, v in self.config.model_dump().items()
            if v != type(self.config).model_fields[k].get_default(call_default_factory=True)
            and len(repr(v)) <= 60
        )
        return f"{type(self).__name__}({shown})"

    # --- the contract ---------------------------------------------------------------------

    def triage_band(self) -> TriageBand | None:
        """The offline probabilities this metric sends to the judge in a triage run (the
        offline scorer decides the others); None for a metric without a calibrated offline
        scorer whose score is a probability: a triage run judges all its items."""
        return None

    @final
    async def score(self, case: C, services: Services) -> MetricResult:
        """One case's result: the judged or offline hook, with a size limit, a judge's
        failure or a :class:`ScoreFailed` recorded as a failed result.

        In a triage run (``services.triage``) a metric with a :meth:`triage_band` is
        scored offline first: a probability outside the band is the result (no judge
        call); one inside it, or an item the offline scorer cannot score (a language it
        does not read, a text over its size limit, "needs a judge"), goes to the judge.
        The result's ``triage`` says which decided and why."""
        judge = services.judge if self.uses_judge else None
        band = self.triage_band() if judge is not None and services.triage else None
        if judge is None:
            offline = "offline" if self.uses_judge else None
            return await self._scored(self.offline(case, services), offline)
        if band is None or services.triage is None:
            return await self._scored(self.judged(case, judge, services), judge.name)
        try:
            found = await self.offline(case, services)
        except (OverBudget, ScoreFailed) as exc:
            decision = TriageDecision(decided_by="judge", why=f"offline: {exc}")
        else:
            decision = _triaged(found, band)
            if decision.decided_by == "offline":
                await self._count_saved(case, services)
                result = await self._scored(_given(found), "offline")
                return result.model_copy(update={"triage": decision})
        result = await self._scored(self.judged(case, judge, services), judge.name)
        return result.model_copy(update={"triage": decision})

    async def _count_saved(self, case: C, services: Services) -> None:
        """What the judge would have been sent for ``case``, told to the triage's
        ``counter`` (a prompt over the budget would not have been sent: nothing counted)."""
        counter = services.triage.counter if services.triage is not None else None
        if counter is None:
            return
        with contextlib.suppress(OverBudget, JudgeError, ScoreFailed):
            await self.judged(case, counter, services)

    async def _scored(self, hook: Awaitable[Score], judge_name: str | None) -> MetricResult:
        """The result of a hook's score, its failures recorded as failed results."""
        try:
            found = await hook
        except OverBudget as exc:
            limit = {exc.limit: getattr(self.config, exc.limit)} if exc.limit else {}
            return self._failed_result(str(exc), self.details_type(**limit), judge_name)
        except JudgeError as exc:
            details = self.details_type(raw_reply=raw_reply(exc))
            return self._failed_result(str(exc), details, judge_name)
        except ScoreFailed as exc:
            return self._failed_result(str(exc), exc.details or self.details_type(), judge_name)
        details = _judged_by(found.details or self.details_type(), judge_name)
        if found.not_applicable is not None:
            return MetricResult.not_applying(self.name, found.not_applicable, found.reason, details)
        return MetricResult(
            metric=self.name, score=found.value, reason=found.reason, details=details
        )

    def _failed_result(self, error: str, details: MetricDetails, judge: str | None) -> MetricResult:
        details = _judged_by(details, judge)
        return MetricResult(metric=self.name, score=None, error=error, details=details)

    async def judged(self, case: C, judge: Judge, services: Services) -> Score:
        """The case scored by ``judge``."""
        raise NotImplementedError(f"{type(self).__name__} does not ask a judge")

    async def offline(self, case: C, services: Services) -> Score:
        """The case scored without a judge (its offline algorithm, or the metric's only
        one when it asks none)."""
        raise NotImplementedError(f"{type(self).__name__} has no offline score")


async def _given(found: Score) -> Score:
    return found


def _triaged(found: Score, band: TriageBand) -> TriageDecision:
    """Who decides an item whose offline score is ``found``: the offline scorer for a
    probability outside ``band``, else the judge."""
    if found.not_applicable is not None or found.value is None:
        why = found.not_applicable or "no offline score"
        return TriageDecision(decided_by="judge", why=f"offline: {why}")
    if isinstance(found.details, ReaderDetails) and found.details.language is not None:
        # the band was measured on English text
        return TriageDecision(decided_by="judge", why=f"offline: {found.details.language}")
    value = round(found.value, 6)
    if band.decides(found.value):
        return TriageDecision(
            decided_by="offline", offline_score=value, why=f"outside the band {band}"
        )
    return TriageDecision(decided_by="judge", offline_score=value, why=f"inside the band {band}")


def _judged_by(details: MetricDetails, judge: str | None) -> MetricDetails:
    """``details`` naming the judge that scored (``offline`` without one) unless they do."""
    if details.judge is not None or judge is None:
        return details
    return details.model_copy(update={"judge": judge})


def _excluded(config: MetricConfig | None) -> dict[str, Any]:
    """The fields of ``config`` that ``model_dump`` leaves out (the judge, the embedder)."""
    if config is None:
        return {}
    return {
        name: getattr(config, name)
        for name, field in type(config).model_fields.items()
        if field.exclude
    }


class ProtocolMetric(Metric[Any]):
    """A metric written to the older protocol (``name``, ``case_type``, an async
    ``score(case, services)`` and optional ``judge``, ``embedder``, ``threshold``,
    ``label``, ``uses_judge``, ``score_is_probability``, ``requires``), run as a
    :class:`Metric`: :meth:`of` reads its members once and declares them as the class
    variables of an adapter made for it. Its results pass through unchanged."""

    config_type = JudgedConfig
    inner: Any

    @classmethod
    def of(cls, inner: Any, name: str | None = None) -> ProtocolMetric:
        """The adapter of ``inner`` (``name``: the one it is registered under, else its
        own); a TypeError when it has no name or case type."""
        name = name or getattr(inner, "name", None)
        kind = getattr(inner, "case_type", None)
        if not isinstance(name, str) or not name or not isinstance(kind, type):
            raise TypeError(f"metric {inner!r} needs a name and a case_type")
        if not callable(getattr(inner, "score", None)):
            raise TypeError(f"metric {inner!r} has no score(case, services)")
        declared = {
            "name": name,
            "case_type": kind,
            "uses_judge": bool(getattr(inner, "uses_judge", True)),
            "score_is_probability": bool(getattr(inner, "score_is_probability", True)),
            "requires": as_requires(getattr(inner, "requires", ())),
            "details_type": getattr(inner, "details_type", MetricDetails),
        }
        adapter = type(f"{type(inner).__name__}Metric", (cls,), declared)
        given = getattr(inner, "threshold", None)
        threshold = None
        if isinstance(given, (int, float)) and not isinstance(given, bool) and 0 <= given <= 1:
            threshold = float(given)
        label = getattr(inner, "label", None)
        made: ProtocolMetric = adapter(
            judge=getattr(inner, "judge", None),
            embedder=getattr(inner, "embedder", None),
            threshold=threshold,
            label=label if isinstance(label, str) else None,
        )
        made.inner = inner
        return made

    def __repr__(self) -> str:
        return repr(self.inner)

    async def judged(self, case: Any, judge: Judge, services: Services) -> Score:
        return await self._inner(case, services)

    async def offline(self, case: Any, services: Services) -> Score:
        return await self._inner(case, services)

    async def _inner(self, case: Any, services: Services) -> Score:
        result = await self.inner.score(case, services)
        if not isinstance(result, MetricResult):
            raise TypeError(
                f"metric {self.inner!r}: score() returned a {type(result).__name__}, not a "
                "MetricResult"
            )
        if result.error is not None:
            raise ScoreFailed(result.error, result.details)
        if result.not_applicable is not None:
            return Score.not_applying(result.not_applicable, result.reason, result.details)
        return Score(result.score, result.reason, result.details)
