"""A metric's evidence on one case, as the report lays it over the case: notes on the
retrieved chunks (each statement and its verdict, each side's similarity), notes on a
session's turns (score, reason, the least supported claim and its closest context
sentence), and facts (counts, components).

Each details type of the built-in metrics has a reader here, reading its fields by
attribute; a metric whose details type has none still shows the fields every metric has
(judge, attempts, tokens) and its own fields as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contextlens.metrics.context import ContextDetails
from contextlens.metrics.context_precision import PrecisionDetails
from contextlens.metrics.context_similarity import SimilarityDetails
from contextlens.metrics.contextual_relevancy import RelevancyDetails
from contextlens.report.format import fmt_score
from contextlens.schemas import MetricDetails

__all__ = ["MAX_TEXT", "Evidence", "clip", "evidence_of"]

#: Characters of one text (a chunk, an answer, a reply) the page shows; the rest is in the
#: run's ``cases.jsonl``.
MAX_TEXT = 20_000
_BASE_FIELDS = frozenset(MetricDetails.model_fields)


def clip(value: Any, limit: int = MAX_TEXT) -> Any:
    """Text cut to ``limit`` characters, saying how much was left out."""
    if not isinstance(value, str) or len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value) - limit:,} more characters in cases.jsonl)"


@dataclass
class Evidence:
    """What the page shows of one item's details."""

    chunks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: list[tuple[str, str]] = field(default_factory=list)

    def note(self, chunk: int, **note: Any) -> None:
        self.chunks.setdefault(chunk, []).append(note)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.chunks:
            out["chunks"] = {str(k): v for k, v in sorted(self.chunks.items())}
        if self.turns:
            out["turns"] = self.turns
        if self.facts:
            out["facts"] = [list(f) for f in self.facts]
        return out


Reader = Callable[[Any, int, Evidence], None]


def _relevancy(details: RelevancyDetails, n_chunks: int, ev: Evidence) -> None:
    for v in details.verdicts:
        ev.note(
            v.chunk,
            kind="statement",
            text=clip(v.statement, 2000),
            verdict=v.verdict,
            reason=clip(v.reason, 2000),
            value=v.relevance,
        )
    for c in details.chunks:
        if c.probability is not None:
            ev.note(c.index, kind="value", label="relevance to the input", value=c.probability)
    ev.facts.append(("relevant statements", f"{details.relevant} of {details.statements}"))
    if details.method:
        ev.facts.append(("method", details.method))


def _similarity(details: SimilarityDetails, n_chunks: int, ev: Evidence) -> None:
    skipped = set(details.skipped_contexts or [])
    kept = [i for i in range(max(n_chunks, 0)) if i not in skipped]
    sides = (
        ("query similarity", details.query_context_similarity),
        ("answer similarity", details.answer_context_similarity),
    )
    for label, side in sides:
        if side is None:
            continue
        scores = side.contexts_score
        chunks = kept if len(kept) == len(scores) else list(range(len(scores)))
        for i, value in zip(chunks, scores, strict=True):
            ev.note(i, kind="value", label=label, value=value)
        ev.facts.append((f"{label} (mean)", fmt_score(side.score)))
    for i in sorted(skipped):
        ev.note(i, kind="value", label="skipped: blank", value=None)
    if details.score is not None:
        ev.facts.append(("harmonic mean", fmt_score(details.score)))


def _context(details: ContextDetails, n_chunks: int, ev: Evidence) -> None:
    for turn in details.interactions:
        note: dict[str, Any] = {
            "score": turn.score,
            "reason": clip(turn.reason, 4000),
            "error": turn.error,
            "raw_reply": clip(turn.raw_reply, 4000),
            "weight": turn.weight,
        }
        for name in ("claim", "claim_support", "evidence"):  # where the metric records them
            value = getattr(turn, name, None)
            if value is not None:
                note[name] = clip(value, 2000)
        ev.turns[turn.qa_id] = {k: v for k, v in note.items() if v is not None}
    ev.facts.append(("turns", f"{details.n_interactions} ({details.n_failed} failed)"))
    if details.ci_low is not None and details.ci_high is not None:
        ev.facts.append(
            ("session interval", f"{fmt_score(details.ci_low)} to {fmt_score(details.ci_high)}")
        )


def _precision(details: PrecisionDetails, n_chunks: int, ev: Evidence) -> None:
    for name, value in (details.components or {}).items():
        ev.facts.append((name.replace("_", " "), fmt_score(value)))
    if details.latency is not None:
        ev.facts.append(("judge latency", f"{details.latency:.2f} s"))


READERS: dict[type[MetricDetails], Reader] = {
    RelevancyDetails: _relevancy,
    SimilarityDetails: _similarity,
    ContextDetails: _context,
    PrecisionDetails: _precision,
}
"""The reader of each details type the report knows."""


def evidence_of(details: Any, n_chunks: int = 0) -> Evidence:
    """The evidence of one item's ``details`` for a case of ``n_chunks`` retrieved chunks."""
    ev = Evidence()
    reader = next((r for t, r in READERS.items() if isinstance(details, t)), None)
    if reader is not None:
        reader(details, n_chunks, ev)
    elif isinstance(details, MetricDetails):
        for name, value in details.model_dump(mode="json").items():
            if name not in _BASE_FIELDS:
                ev.facts.append((name.replace("_", " "), clip(_shown(value), 2000)))
    if isinstance(details, MetricDetails):
        if details.attempts is not None and details.attempts > 1:
            ev.facts.append(("judge attempts", str(details.attempts)))
        if details.usage is not None and details.usage.total_tokens:
            ev.facts.append(
                (
                    "tokens",
                    f"{details.usage.prompt_tokens:,} prompt, "
                    f"{details.usage.completion_tokens:,} completion",
                )
            )
    return ev


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return fmt_score(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
