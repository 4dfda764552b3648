"""What a run would cost, found without making a judge call.

``evaluate(cases, metrics, dry_run=True)`` (``contextlens run ... --dry-run``) runs the
whole run as it would go, reading and checking every case and building every prompt, with
each judge replaced by a :class:`DryRunJudge`. That judge answers from the judge's cache
when the cache has the reply (the real run will not pay for it either), and otherwise counts
the call as the backend would send it (:func:`~contextlens.judges.sizing.call_size`: the
compact prompt and the response-format schema where the server enforces it) and answers with
the shortest valid reply, so the metric goes on to its next call as it would. What it
counted is a :class:`CostEstimate`.

Prompt tokens are counted with the provider's tokenizer where one is on this machine (see
:func:`~contextlens.engine.tokens.counter_for`), else as characters / 4. A reply's completion
tokens are given as a range, from the shortest valid reply to the bound the call is sent
with (``max_tokens``), and an expected figure: the mean completion tokens per call of this
metric and judge in the completed runs under the run's ``out`` folder when there are any
(``measured``), else a reply of the usual length for its schema (``typical``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from contextlens.backend import ChatBackend, Message, Usage
from contextlens.engine import accounting
from contextlens.engine.accounting import PRICES, LedgerReport, PriceTable
from contextlens.engine.tokens import counter_for
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judge, Judgement
from contextlens.judges.llm import LLMJudge
from contextlens.judges.sizing import call_size, shortest_reply, typical_reply
from contextlens.runfiles import read_small
from contextlens.schemas import MetricKey
from contextlens.terminal import safe

__all__ = ["CostEstimate", "DryRunJudge", "MetricEstimate", "measured_completions"]

T = TypeVar("T", bound=BaseModel)


@dataclass
class _Tally:
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_low: int = 0
    completion_expected: float = 0.0
    completion_high: int = 0
    tokenizer: str = ""
    source: str = "typical"


class DryRunJudge:
    """A judge that makes no call: it counts what ``inner`` would send and answers with the
    shortest valid reply, or with the cached reply when ``inner``'s cache has it.
    ``measured``: mean completion tokens per call, by metric key, to expect instead of a
    typical reply. A judge that is not an :class:`LLMJudge` makes its own calls: they are
    counted with the messages as they are, and have no price."""

    def __init__(
        self, inner: Judge, measured: Mapping[str, float] | None = None, *, records: bool = True
    ) -> None:
        self.inner = inner
        self.records = records
        self.name = inner.name
        self.backend: ChatBackend | None = inner.backend if isinstance(inner, LLMJudge) else None
        self.model = self.backend.model if self.backend is not None else None
        self.price_key = self.backend.price_key if self.backend is not None else None
        self.measured = dict(measured or {})
        self.tallies: dict[str, _Tally] = {}

    def connection_key(self) -> str:
        return self.inner.connection_key()

    def max_connections(self) -> int:
        return self.inner.max_connections()

    def _tally(self) -> _Tally:
        metric = accounting.current_metric.get()
        found = self.tallies.get(metric)
        if found is None:
            found = self.tallies[metric] = _Tally()
        return found

    async def judge(
        self, messages: Sequence[Message], schema: type[T], *, fence: Fence = DEFAULT_FENCE
    ) -> Judgement[T]:
        tally = self._tally()
        inner = self.inner if isinstance(self.inner, LLMJudge) else None
        hit = inner.cached(messages, schema) if inner is not None else None
        if inner is not None and hit is not None:
            tally.cache_hits += 1
            if self.records:
                accounting.record(judge=self.name, model=self.price_key, cache_hits=1)
            output = inner.read(hit, schema, fence=fence)
            return Judgement(output=output, raw=hit.text, usage=Usage(), latency=0.0)
        size = call_size(self.backend, messages, schema)
        counter = counter_for(self.model)
        prompt = counter.prompt(size.messages, size.schema_text)
        reply = shortest_reply(schema)
        low = counter.count(json.dumps(reply, separators=(",", ":")))
        metric = accounting.current_metric.get()
        if metric in self.measured:
            expected, tally.source = self.measured[metric], "measured"
        else:
            expected = counter.count(typical_reply(schema))
        expected = min(max(expected, low), size.max_tokens)
        tally.calls += 1
        tally.prompt_tokens += prompt
        tally.completion_low += low
        tally.completion_expected += expected
        tally.completion_high += max(size.max_tokens, low)
        tally.tokenizer = counter.name
        usage = Usage(prompt_tokens=prompt, completion_tokens=round(expected))
        if self.records:
            accounting.record(judge=self.name, model=self.price_key, calls=1, usage=usage)
        return Judgement(
            output=schema.model_validate(reply), raw=json.dumps(reply), usage=usage, latency=0.0
        )


class MetricEstimate(BaseModel):
    """What one metric's judge calls would take: ``calls`` to be paid for (``cache_hits``
    more are answered from the cache), their prompt tokens, completion tokens expected and
    at least / at most, and the cost expected and its range in USD (None: the model has no
    price). ``tokenizer`` says how tokens were counted, ``completion_source`` where the
    expected completion comes from (``measured`` or ``typical``)."""

    metric: str
    judge: str | None
    model: str | None
    calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    completion_low: int
    completion_high: int
    cost: float | None
    cost_low: float | None
    cost_high: float | None
    tokenizer: str
    completion_source: str
    triage_offline: int | None = None
    """With ``triage``: the items the offline scorer would decide (no call)."""
    triage_judged: int | None = None
    """With ``triage``: the items that would go to the judge."""


class CostEstimate(BaseModel):
    """What ``evaluate(..., dry_run=True)`` returns: per metric, the judge calls the run
    would make and their cost, found without making one."""

    cases: int
    metrics: list[MetricEstimate]

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.metrics)

    def _sum(self, name: str) -> float | None:
        values = [getattr(m, name) for m in self.metrics if m.calls]
        return None if any(v is None for v in values) else sum(values)

    @property
    def cost(self) -> float | None:
        """The expected cost of the whole run (None when a judged model has no price)."""
        return self._sum("cost")

    @property
    def cost_low(self) -> float | None:
        return self._sum("cost_low")

    @property
    def cost_high(self) -> float | None:
        return self._sum("cost_high")

    def __str__(self) -> str:
        lines = [f"dry run over {self.cases} cases: no judge call made"]
        for m in self.metrics:
            cost = (
                "no price for the model"
                if m.cost is None
                else f"${m.cost:.4f} (${m.cost_low:.4f} to ${m.cost_high:.4f})"
            )
            lines.append(
                f"{safe(m.metric)}: {m.calls} calls ({m.cache_hits} cached), "
                f"{m.prompt_tokens} prompt tokens, {m.completion_tokens} completion tokens "
                f"({m.completion_low} to {m.completion_high}), {cost}"
            )
            if m.triage_offline is not None and m.triage_judged is not None:
                decided = m.triage_offline + m.triage_judged
                share = f" ({m.triage_judged / decided:.0%})" if decided else ""
                lines.append(
                    f"  triage: {m.triage_judged} of {decided} items to the judge{share}, "
                    f"{m.triage_offline} decided offline"
                )
        return "\n".join(lines)


def estimate_of(
    keys: Iterable[MetricKey],
    judges: Mapping[MetricKey, DryRunJudge | None],
    cases: int,
    prices: PriceTable | None = None,
    triage: Mapping[MetricKey, Mapping[str, int]] | None = None,
) -> CostEstimate:
    """The estimate of a dry run whose metrics ``keys`` were judged by ``judges`` (None: the
    metric asks no judge); ``triage``: by metric, its items by who decided them
    (``offline``, ``judge``) in a triage run."""
    table = prices or PRICES
    rows = []
    for key in keys:
        judge = judges.get(key)
        decided = (triage or {}).get(key)
        tally = judge.tallies.get(key, _Tally()) if judge is not None else _Tally()
        model = judge.model if judge is not None else None
        price_key = judge.price_key if judge is not None else None
        expected = round(tally.completion_expected)

        def cost(completion: int, tally: _Tally = tally, price_key: str | None = price_key) -> Any:
            if not tally.calls:
                return 0.0
            return table.cost(price_key, Usage(tally.prompt_tokens, completion))

        rows.append(
            MetricEstimate(
                metric=key,
                judge=judge.name if judge is not None else None,
                model=model,
                calls=tally.calls,
                cache_hits=tally.cache_hits,
                prompt_tokens=tally.prompt_tokens,
                completion_tokens=expected,
                completion_low=tally.completion_low,
                completion_high=tally.completion_high,
                cost=cost(expected),
                cost_low=cost(tally.completion_low),
                cost_high=cost(tally.completion_high),
                tokenizer=tally.tokenizer or "-",
                completion_source=tally.source if tally.calls else "-",
                triage_offline=None if decided is None else decided["offline"],
                triage_judged=None if decided is None else decided["judge"],
            )
        )
    return CostEstimate(cases=cases, metrics=rows)


def measured_completions(out: Path | None, judges: Mapping[MetricKey, str]) -> dict[str, float]:
    """Mean completion tokens per call of each metric (key -> its judge's name) in the
    completed runs under ``out`` (their ``summary.json``, the 20 newest), where there are
    any; a folder that cannot be read has none."""
    if out is None or not out.is_dir():
        return {}
    try:
        summaries = sorted(out.glob("*/summary.json"), key=lambda p: p.stat().st_mtime)[-20:]
    except OSError:
        return {}
    wanted = {str(metric): judge for metric, judge in judges.items()}
    totals: dict[str, list[int]] = {}
    for path in summaries:
        try:  # a folder from elsewhere: a FIFO or a device there is not waited on
            data = json.loads(read_small(path))
            entries = LedgerReport.model_validate(data["accounting"]).entries
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # InputError too
            continue  # the estimate goes on from the schemas
        for entry in entries:
            if wanted.get(entry.metric) == entry.judge and entry.calls:
                pair = totals.setdefault(entry.metric, [0, 0])
                pair[0] += entry.completion_tokens
                pair[1] += entry.calls
    return {m: tokens / calls for m, (tokens, calls) in totals.items() if calls and tokens}
