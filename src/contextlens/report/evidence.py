"""A metric's evidence on one case, as the report lays it over the case: notes on the
retrieved chunks (each statement and its verdict, each claim that points to the chunk, the
chunk's verdict at its rank, its retrieval id and whether it is relevant, each side's
similarity), marks on the texts (a claim in the answer with its verdict, the closest sentence
of its chunk), notes on a session's turns, tables (the claims, the verdicts by rank, the
ranked ids) and facts (counts, components, measures).

Each details type of the built-in metrics has a reader here, reading its fields by
attribute; a details type without one is shown as facts and tables of its own fields (a
list of records is a table, anything else a labelled value), never as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextlens.metrics.base import ReaderDetails
from contextlens.metrics.claims import ClaimsDetails
from contextlens.metrics.context import ContextDetails
from contextlens.metrics.context_precision import PrecisionDetails
from contextlens.metrics.context_precision_ranked import RankedPrecisionDetails
from contextlens.metrics.context_recall import ContextRecallDetails
from contextlens.metrics.context_similarity import SimilarityDetails
from contextlens.metrics.contextual_relevancy import RelevancyDetails
from contextlens.metrics.retrieval import RetrievalDetails, grades_of
from contextlens.metrics.turns import TurnDetails
from contextlens.offline.text import sentences
from contextlens.report.format import fmt_score
from contextlens.schemas import Dataset, MetricDetails, ModelTestCase
from contextlens.tools import ToolCall, labelled, labelled_calls

__all__ = ["MAX_TEXT", "Evidence", "clip", "evidence_of", "readable"]

#: Characters of one text (a chunk, an answer, a reply) the page shows; the rest is in the
#: run's ``cases.jsonl``.
MAX_TEXT = 20_000
#: Facts a details type without a reader shows at most (the rest is in ``results.jsonl``).
MAX_FACTS = 60
_BASE_FIELDS = frozenset(MetricDetails.model_fields)
_READER_FIELDS = frozenset(ReaderDetails.model_fields) - _BASE_FIELDS
_WORD = re.compile(r"\w+")
Cell = str | dict[str, Any]


def clip(value: Any, limit: int = MAX_TEXT) -> Any:
    """Text cut to ``limit`` characters, saying how much was left out."""
    if not isinstance(value, str) or len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value) - limit:,} more characters in cases.jsonl)"


def readable(value: Any, limit: int = 2000) -> str:
    """A value as a person reads it: a number with three decimals, a list as its items
    joined, a mapping as ``key: value`` pairs; never JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return fmt_score(value)
    if isinstance(value, Mapping):
        text = "; ".join(f"{k}: {readable(v, limit)}" for k, v in value.items())
    elif isinstance(value, (list, tuple, set, frozenset)):
        text = ", ".join(readable(v, limit) for v in value)
    else:
        text = str(value)
    return str(clip(text, limit))


@dataclass
class Table:
    """Rows of evidence under a title: each cell a text, or ``{"text", "tone", "chunk"}``
    (a verdict's tone, the chunk a cell points to)."""

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    tones: list[str] = field(default_factory=list)

    def add(self, cells: Sequence[Cell], tone: str = "") -> None:
        self.rows.append(list(cells))
        self.tones.append(tone)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": self.columns,
            "rows": self.rows,
            "tones": self.tones,
        }


@dataclass
class Evidence:
    """What the page shows of one item's details."""

    chunks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: list[tuple[str, str]] = field(default_factory=list)
    marks: list[dict[str, Any]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    def note(self, chunk: int, **note: Any) -> None:
        self.chunks.setdefault(chunk, []).append(note)

    def mark(
        self, on: str | list[str], text: str | None, tone: str, label: str, tag: str = ""
    ) -> None:
        """Highlight ``text`` in the field ``on`` (or the first of several that holds it),
        titled ``label`` and numbered ``tag``."""
        if text:
            mark = {"on": on, "text": clip(text, 2000), "tone": tone, "label": label}
            self.marks.append({**mark, "tag": tag} if tag else mark)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.chunks:
            out["chunks"] = {str(k): v for k, v in sorted(self.chunks.items())}
        if self.turns:
            out["turns"] = self.turns
        if self.facts:
            out["facts"] = [list(f) for f in self.facts]
        if self.marks:
            out["marks"] = self.marks
        if self.tables:
            out["tables"] = [t.to_json() for t in self.tables]
        return out


@dataclass(frozen=True)
class Texts:
    """The case's texts a reader lays evidence over."""

    chunks: list[str] = field(default_factory=list)
    retrieved_ids: list[str] | None = None
    relevant_ids: dict[str, float] | None = None
    turn_chunks: dict[str, list[str]] | None = None
    turn_tools: dict[str, list[ToolCall]] | None = None
    tools: list[tuple[str, ToolCall]] = field(default_factory=list)
    """The case's tool calls with their labels (``tools_called[0] (weather)``)."""


def _texts(case: Any, chunks: Sequence[str] | None = None, tools: Sequence[ToolCall] = ()) -> Texts:
    if chunks is not None:
        return Texts(list(chunks), tools=labelled(tools))
    if isinstance(case, ModelTestCase):
        relevant = grades_of(case.relevant_ids) if case.relevant_ids is not None else None
        return Texts(
            list(case.retrieval_context or []),
            case.retrieved_ids,
            relevant,
            tools=labelled_calls(case),
        )
    if isinstance(case, Dataset):
        return Texts(
            turn_chunks={b.qa_id: list(b.retrieval_context or []) for b in case.conversation},
            turn_tools={b.qa_id: list(b.tools_called or []) for b in case.conversation},
        )
    return Texts()


def _verdict(verdict: str, yes: str, no: str) -> dict[str, str]:
    return {"text": yes if verdict == "yes" else no, "tone": "good" if verdict == "yes" else "bad"}


def _chunk_cell(index: int | None) -> Cell:
    return "none" if index is None else {"text": f"#{index + 1}", "chunk": index}


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2 or w.isdigit()}


def closest_sentence(claim: str, chunk: str) -> str | None:
    """The sentence of ``chunk`` that shares the most with ``claim``, its shared words
    weighed by their length (None when none shares a word): where the chunk bears on the
    claim."""
    words = _words(claim)
    best, best_shared = None, 0
    for sentence in sentences(chunk):
        shared = sum(len(w) for w in words & _words(sentence))
        if shared > best_shared:
            best, best_shared = sentence, shared
    return best


Reader = Callable[[Any, Texts, Evidence], None]


def _relevancy(details: RelevancyDetails, texts: Texts, ev: Evidence) -> None:
    for v in details.verdicts:
        ev.note(
            v.chunk,
            kind="statement",
            text=clip(v.statement, 2000),
            verdict=v.verdict,
            reason=clip(v.reason, 2000),
            value=v.relevance,
        )
        relevant = v.verdict == "yes"
        chunk = texts.chunks[v.chunk] if 0 <= v.chunk < len(texts.chunks) else ""
        if v.statement.strip() == chunk.strip():  # the whole chunk: its note says it
            continue
        ev.mark(
            f"chunk:{v.chunk}",
            v.statement,
            "good" if relevant else "bad",
            "statement relevant to the input"
            if relevant
            else "statement not relevant to the input",
        )
    for c in details.chunks:
        if c.probability is not None:
            ev.note(c.index, kind="value", label="relevance to the input", value=c.probability)
    ev.facts.append(("relevant statements", f"{details.relevant} of {details.statements}"))
    if details.expected_relevant is not None:
        ev.facts.append(("expected relevant statements", f"{details.expected_relevant:.2f}"))
    if details.method:
        ev.facts.append(("method", details.method))


def _similarity(details: SimilarityDetails, texts: Texts, ev: Evidence) -> None:
    skipped = set(details.skipped_contexts or [])
    kept = [i for i in range(len(texts.chunks)) if i not in skipped]
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


def _claims(details: ClaimsDetails, texts: Texts, ev: Evidence) -> None:
    on, whose = (
        ("expected", "the expected output")
        if isinstance(details, ContextRecallDetails)
        else ("output", "the answer")
    )
    columns = ["#", "claim", "verdict", "support", "closest evidence", "closest sentence", "reason"]
    table = Table(f"Claims of {whose}", columns)
    for n, claim in enumerate(details.claims, 1):
        supported = claim.verdict == "yes"
        tone = "good" if supported else "bad"
        chunk = claim.chunk if claim.chunk is not None and claim.chunk >= 0 else None
        text = texts.chunks[chunk] if chunk is not None and chunk < len(texts.chunks) else ""
        sentence = getattr(claim, "evidence", None) or (
            closest_sentence(claim.claim, text) if text else None
        )
        verdict = "supported" if supported else "not supported"
        ev.mark(on, claim.claim, tone, f"claim {n}: {verdict}", str(n))
        if chunk is not None:
            ev.note(
                chunk,
                kind="claim",
                n=n,
                text=clip(claim.claim, 2000),
                verdict=claim.verdict,
                support=claim.support,
                sentence=clip(sentence, 2000),
                reason=clip(claim.reason, 2000),
                whose=whose,
            )
            ev.mark(
                f"chunk:{chunk}",
                sentence,
                tone,
                f"closest sentence to claim {n} ({verdict})",
                str(n),
            )
        table.add(
            [
                str(n),
                clip(claim.claim, 2000),
                _verdict(claim.verdict, "supported", "not supported"),
                fmt_score(claim.support),
                f"tool output {claim.tool}" if claim.tool else _chunk_cell(chunk),
                clip(sentence, 2000) or "—",
                clip(claim.reason, 2000),
            ],
            tone,
        )
    if table.rows:
        ev.tables.append(table)
    ev.facts.append(("supported claims", f"{details.supported} of {details.total}"))
    _tool_use(details, texts, ev)
    if details.abstention:
        ev.facts.append(("abstains", details.abstention.replace("_", " ")))
    if details.method:
        ev.facts.append(("method", details.method))
    _duplicates(details.duplicates, ev)
    if details.latency is not None:
        ev.facts.append(("judge latency", f"{details.latency:.2f} s"))


def _tool_use(details: ClaimsDetails, texts: Texts, ev: Evidence) -> None:
    """The tool-use view: each tool call of the case with the claims that rest on its
    output (their numbers and verdicts), a call no claim rests on said to be unused."""
    resting: dict[str, list[tuple[int, str]]] = {}
    for n, claim in enumerate(details.claims, 1):
        if claim.tool:
            resting.setdefault(claim.tool, []).append((n, claim.verdict))
    labels = [label for label, _ in texts.tools] or list(resting)
    if not labels:
        return
    calls = dict(texts.tools)
    table = Table("Tool use", ["tool call", "input", "output", "claims resting on it"])
    for label in labels:
        call = calls.get(label)
        claims = resting.get(label, [])
        supported = sum(v == "yes" for _, v in claims)
        said = (
            ", ".join(f"#{n} ({'supported' if v == 'yes' else 'not supported'})" for n, v in claims)
            if claims
            else "none: no claim rests on its output"
        )
        tone = "" if not claims else "good" if supported == len(claims) else "bad"
        table.add(
            [
                label,
                readable(call.input) if call is not None else "—",
                clip(call.output, 2000) if call is not None and call.output else "—",
                {"text": said, "tone": tone} if tone else said,
            ],
            tone,
        )
    ev.tables.append(table)
    on_tools = sum(len(v) for v in resting.values())
    ev.facts.append(("claims resting on a tool output", f"{on_tools} of {details.total}"))


def _duplicates(groups: Sequence[Any] | None, ev: Evidence) -> None:
    for group in groups or []:
        ranks = ", ".join(f"#{i + 1}" for i in group.chunks)
        ev.facts.append(("near-duplicate chunks", f"{ranks} (cosine ≥ {group.similarity:.2f})"))


def _ranked(details: RankedPrecisionDetails, texts: Texts, ev: Evidence) -> None:
    verdicts = sorted(details.verdicts, key=lambda v: v.chunk)
    merges = {
        v.chunk: ", ".join(f"#{i + 1}" for i in v.merged or [] if i != v.chunk) for v in verdicts
    }
    merged_any = any(merges.values())
    columns = ["rank", "useful", "usefulness", *(["merged with"] if merged_any else []), "reason"]
    table = Table("Verdicts by rank", columns)
    for v in verdicts:
        merged = merges[v.chunk]
        ev.note(
            v.chunk,
            kind="rank",
            rank=v.chunk + 1,
            verdict=v.verdict,
            value=v.usefulness,
            reason=clip(v.reason, 2000),
            merged=merged or None,
        )
        cells: list[Cell] = [
            _chunk_cell(v.chunk),
            _verdict(v.verdict, "useful", "not useful"),
            fmt_score(v.usefulness),
        ]
        if merged_any:
            cells.append(merged or "—")
        table.add([*cells, clip(v.reason, 2000)], "good" if v.verdict == "yes" else "bad")
    if table.rows:
        ev.tables.append(table)
    ev.facts.append(("useful chunks", f"{details.useful} of {details.chunks}"))
    if details.against:
        against = "the expected output" if details.against == "expected_output" else "the input"
        ev.facts.append(("usefulness judged against", against))
    if details.method:
        ev.facts.append(("method", details.method))
    if details.judge_calls is not None:
        ev.facts.append(("judge calls", str(details.judge_calls)))
    _duplicates(details.duplicates, ev)


_MEASURES = (
    ("hit_rate", "hit@{k}"),
    ("recall", "recall@{k}"),
    ("precision", "precision@{k}"),
    ("mrr", "MRR@{k}"),
    ("ndcg", "nDCG@{k}"),
    ("map", "AP@{k}"),
)


def _retrieval(details: RetrievalDetails, texts: Texts, ev: Evidence) -> None:
    found = details.measures
    level = details.relevance_level if details.relevance_level is not None else 1.0
    k = found.k if found is not None else None
    if found is not None:
        measures = Table("Measures", [label.format(k=k) for _, label in _MEASURES])
        cells: list[Cell] = []
        for name, _ in _MEASURES:
            value = fmt_score(getattr(found, name))
            if name == details.measure:
                cells.append({"text": f"{value} (the score)", "tone": "accent"})
            else:
                cells.append(value)
        measures.add(cells)
        ev.tables.append(measures)
    if texts.retrieved_ids is not None:
        grades = texts.relevant_ids or {}
        top = f"in the top {k}" if k is not None else "in the list"
        ranked = Table("Ranked ids", ["rank", "id", "relevant", "grade", top])
        for rank, ident in enumerate(texts.retrieved_ids, 1):
            grade = grades.get(ident)
            relevant = grade is not None and grade >= level
            within = k is None or rank <= k
            hit = "good" if relevant and within else ("bad" if relevant else "")
            ranked.add(
                [
                    {"text": f"#{rank}", "chunk": rank - 1}
                    if rank <= len(texts.chunks)
                    else f"#{rank}",
                    ident,
                    "not judged"
                    if grade is None
                    else _verdict("yes" if relevant else "no", "relevant", "not relevant"),
                    "—" if grade is None else f"{grade:g}",
                    "yes" if within else "no",
                ],
                hit,
            )
            if rank <= len(texts.chunks):
                ev.note(
                    rank - 1, kind="hit", id=ident, relevant=relevant, grade=grade, within=within
                )
        listed = set(texts.retrieved_ids)
        for ident, grade in grades.items():
            if grade >= level and ident not in listed:
                ranked.add(
                    [
                        "—",
                        ident,
                        {"text": "relevant, not retrieved", "tone": "bad"},
                        f"{grade:g}",
                        "no",
                    ],
                    "bad",
                )
        ev.tables.append(ranked)
    if details.relevant is not None:
        top = f"in the top {k}" if k is not None else "retrieved"
        ev.facts.append(
            ("relevant ids " + top, f"{details.relevant_retrieved or 0} of {details.relevant}")
        )
    if details.first_relevant_rank is not None:
        ev.facts.append(("first relevant id at rank", str(details.first_relevant_rank)))
    if details.missing:
        ev.facts.append(("relevant ids not retrieved", ", ".join(details.missing)))
    if details.retrieved is not None:
        ev.facts.append(("ids retrieved", str(details.retrieved)))
    ev.facts.append(("relevant from grade", f"{level:g}"))


def _context(details: ContextDetails, texts: Texts, ev: Evidence) -> None:
    for turn in details.interactions:
        note: dict[str, Any] = {
            "score": turn.score,
            "reason": clip(turn.reason, 4000),
            "error": turn.error,
            "not_applicable": turn.not_applicable,
            "raw_reply": clip(turn.raw_reply, 4000),
            "weight": turn.weight,
        }
        for name in ("claim", "claim_support", "evidence"):  # where the metric records them
            value = getattr(turn, name, None)
            if value is not None:
                note[name] = clip(value, 2000)
        ev.turns[turn.qa_id] = {k: v for k, v in note.items() if v is not None}
        weak = turn.claim_support is not None and turn.claim_support < 0.5
        ev.mark(
            f"turn:{turn.qa_id}:assistant",
            turn.claim,
            "bad" if weak else "good",
            "least supported claim",
        )
        ev.mark(
            ["system_context", f"turn:{turn.qa_id}:ground_truth", f"turn:{turn.qa_id}:observation"],
            turn.evidence,
            "accent",
            f"closest evidence sentence to {turn.qa_id}'s least supported claim",
        )
    ev.facts.append(("turns", f"{details.n_interactions} ({details.n_failed} failed)"))
    if details.n_not_applicable:
        ev.facts.append(("turns not applicable", str(details.n_not_applicable)))
    if details.ci_low is not None and details.ci_high is not None:
        ev.facts.append(
            ("session interval", f"{fmt_score(details.ci_low)} to {fmt_score(details.ci_high)}")
        )


#: Where a wrapped metric's marks go on a turn: its answer is the turn's reply.
_TURN_MARKS = {"output": "assistant", "expected": "ground_truth"}


def _turns(details: TurnDetails[Any], texts: Texts, ev: Evidence) -> None:
    """Each turn's verdict, with the wrapped metric's evidence on the turn's chunks (notes
    by chunk), marks on its reply and tables titled by the turn."""
    for turn in details.turns:
        chunks = (texts.turn_chunks or {}).get(turn.qa_id, [])
        note: dict[str, Any] = {
            "score": turn.score,
            "reason": clip(turn.reason, 4000),
            "error": turn.error,
            "not_applicable": turn.not_applicable,
            "raw_reply": clip(_raw_of(turn.details), 4000),
            "weight": turn.weight,
        }
        if turn.details is not None:
            tools = (texts.turn_tools or {}).get(turn.qa_id, [])
            inner = evidence_of(turn.details, None, chunks, tools)
            if inner.chunks:
                note["chunks"] = {str(k): v for k, v in sorted(inner.chunks.items())}
            for mark in inner.marks:
                on = _TURN_MARKS.get(mark["on"]) if isinstance(mark["on"], str) else None
                if on is not None:
                    ev.marks.append({**mark, "on": f"turn:{turn.qa_id}:{on}"})
            for table in inner.tables:
                table.title = f"{turn.qa_id}: {table.title}"
                ev.tables.append(table)
        ev.turns[turn.qa_id] = {k: v for k, v in note.items() if v is not None}
    ev.facts.append(("turns", f"{details.n_turns} ({details.n_failed} failed)"))
    if details.n_not_applicable:
        ev.facts.append(("turns not applicable", str(details.n_not_applicable)))
    if details.ci_low is not None and details.ci_high is not None:
        ev.facts.append(
            ("session interval", f"{fmt_score(details.ci_low)} to {fmt_score(details.ci_high)}")
        )


def _raw_of(details: MetricDetails | None) -> str | None:
    return details.raw_reply if details is not None else None


def _precision(details: PrecisionDetails, texts: Texts, ev: Evidence) -> None:
    for name, value in (details.components or {}).items():
        ev.facts.append((name.replace("_", " "), fmt_score(value)))
    if details.latency is not None:
        ev.facts.append(("judge latency", f"{details.latency:.2f} s"))


READERS: dict[type[MetricDetails], Reader] = {
    RelevancyDetails: _relevancy,
    SimilarityDetails: _similarity,
    ContextDetails: _context,
    PrecisionDetails: _precision,
    ClaimsDetails: _claims,
    RankedPrecisionDetails: _ranked,
    RetrievalDetails: _retrieval,
    TurnDetails: _turns,
}
"""The reader of each details type the report knows (a subclass is read as its base)."""


_FOUND: dict[type, Reader | None] = {}


def _reader(kind: type) -> Reader | None:
    """The reader of a details type: its own, or that of the nearest base that has one."""
    if kind not in _FOUND:
        _FOUND[kind] = next((READERS[base] for base in kind.__mro__ if base in READERS), None)
    return _FOUND[kind]


def _own_fields(details: MetricDetails, ev: Evidence) -> None:
    """The fields of a details type without a reader: a list of records as a table, any
    other value as a labelled fact."""
    dumped = details.model_dump(mode="json")
    shown_apart = _BASE_FIELDS | (_READER_FIELDS if isinstance(details, ReaderDetails) else set())
    facts: list[tuple[str, str]] = []
    for name, value in dumped.items():
        if name in shown_apart:
            continue
        label = name.replace("_", " ")
        records = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        if records:
            columns = list(dict.fromkeys(k for v in value for k in v))
            table = Table(label, [c.replace("_", " ") for c in columns])
            for v in value[:200]:
                table.add([readable(v.get(c)) if c in v else "" for c in columns])
            ev.tables.append(table)
        elif isinstance(value, dict) and value:
            facts += [(f"{label} · {k}", readable(v)) for k, v in value.items()]
        else:
            facts.append((label, readable(value)))
    if len(facts) > MAX_FACTS:
        left = len(facts) - MAX_FACTS
        facts = [*facts[:MAX_FACTS], ("more", f"{left} more fields in results.jsonl")]
    ev.facts += facts


def evidence_of(
    details: Any,
    case: ModelTestCase | Dataset | None = None,
    chunks: Sequence[str] | None = None,
    tools: Sequence[ToolCall] = (),
) -> Evidence:
    """The evidence of one item's ``details`` on its ``case`` (None: the run did not record
    it; the evidence then stands without the case's texts), or on the retrieved ``chunks``
    and the ``tools`` calls of one turn."""
    ev = Evidence()
    texts = _texts(case, chunks, tools)
    reader = _reader(type(details))
    if reader is not None:
        reader(details, texts, ev)
    elif isinstance(details, MetricDetails):
        _own_fields(details, ev)
    elif isinstance(details, Mapping) and details:  # details of a metric no longer registered
        ev.facts += [(str(k).replace("_", " "), readable(v)) for k, v in details.items()]
    if isinstance(details, ReaderDetails):
        if details.offline_model:
            ev.facts.append(("offline reader", details.offline_model))
        if details.language:
            ev.facts.append(("language", details.language))
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
        for name in ("max_prompt_tokens", "max_embed_tokens"):
            limit = getattr(details, name)
            if limit is not None:
                ev.facts.append((name.replace("_", " "), f"{limit:,}"))
    return ev
