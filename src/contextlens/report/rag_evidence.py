"""The report's evidence of the citations and sufficient-context metrics: each claim's
citations in a table, the wrong-source and dangling ones marked and noted on their chunks,
and each case's cell of the sufficient-context 2x2. Importing this module adds its readers
to :data:`contextlens.report.evidence.READERS` (the report package imports it)."""

from __future__ import annotations

from contextlens.metrics.citations import CitationsDetails
from contextlens.metrics.diagnostics import DiagnosticClaim, DiagnosticsDetails
from contextlens.metrics.sufficient_context import SufficiencyDetails
from contextlens.report.evidence import (
    READERS,
    Cell,
    Evidence,
    Table,
    Texts,
    clip,
    closest_sentence,
    readable,
)
from contextlens.report.format import fmt_score

__all__ = ["citations_evidence", "diagnostics_evidence", "sufficiency_evidence"]


def citations_evidence(details: CitationsDetails, texts: Texts, ev: Evidence) -> None:
    columns = ["#", "claim", "needs a source", "citations", "supported by", "reason"]
    table = Table("Citations of the answer", columns)
    for n, claim in enumerate(details.claims, 1):
        cited = []
        for c in claim.citations:
            wrong = c.chunk in claim.wrong_source
            said = "wrong source" if wrong else c.verdict
            cited.append(f"{c.marker} → #{c.chunk}: {said}")
            if c.verdict != "dangling" and 0 < c.chunk <= len(texts.chunks):
                where = texts.chunks[c.chunk - 1]
                others = ", ".join(f"#{k}" for k in claim.supported_by if k != c.chunk)
                ev.note(
                    c.chunk - 1,
                    kind="claim",
                    n=n,
                    text=clip(claim.claim, 2000),
                    verdict="yes" if c.verdict == "supported" else "no",
                    support=c.support,
                    sentence=clip(closest_sentence(claim.claim, where), 2000),
                    reason=f"cited as {c.marker}: {said}"
                    + (f"; supported by {others}" if wrong and others else ""),
                    whose="the answer",
                )
        bad = any(c.verdict in ("not supported", "dangling") for c in claim.citations)
        uncited = claim.needs_source and not claim.citations
        tone = "bad" if bad else "accent" if uncited else "good" if claim.citations else ""
        label = "wrong or dangling citation" if bad else "no citation" if uncited else "cited"
        if tone:
            ev.mark("output", claim.claim, tone, f"claim {n}: {label}", str(n))
        table.add(
            [
                str(n),
                clip(claim.claim, 2000),
                readable(claim.needs_source),
                "; ".join(cited) or "none",
                ", ".join(f"#{k}" for k in claim.supported_by) or "none",
                clip(claim.reason, 2000) or "—",
            ],
            tone,
        )
    if table.rows:
        ev.tables.append(table)
    ev.facts.append(("citation precision", fmt_score(details.precision)))
    ev.facts.append(("citation recall", fmt_score(details.recall)))
    if details.combined:
        ev.facts.append(("score is", details.combined))
    ev.facts.append(
        ("supported citations", f"{details.supported_citations} of {details.citations}")
    )
    ev.facts.append(("claims citing a chunk", f"{details.cited_claims} of {details.needs_source}"))
    if details.wrong_source:
        ev.facts.append(("wrong-source citations", str(details.wrong_source)))
    if details.dangling:
        shown = ", ".join(f"{d.marker} (claim {d.claim})" for d in details.dangling)
        ev.facts.append(("dangling citations", shown))
    if details.undecided_citations:
        ev.facts.append(("undecided offline", str(details.undecided_citations)))
    if details.method:
        ev.facts.append(("method", details.method))


def sufficiency_evidence(details: SufficiencyDetails, texts: Texts, ev: Evidence) -> None:
    context = {True: "sufficient", False: "insufficient", None: "cannot tell"}[details.sufficient]
    ev.facts.append(("context", context))
    if details.answered is not None:
        answer = "answered" if details.answered else f"abstained ({details.abstention})"
        ev.facts.append(("answer", answer))
    if details.cell:
        ev.facts.append(("cell", details.cell))
        grid = Table("Context × answer", ["context", "answered", "abstained"])
        for side in ("sufficient", "insufficient"):
            cells: list[Cell] = [side]
            for kind in ("answered", "abstained"):
                here = details.cell == f"{side}, {kind}"
                bad = here and side == "insufficient" and kind == "answered"
                cells.append(
                    {"text": "this case", "tone": "bad" if bad else "good"} if here else ""
                )
            grid.add(cells)
        ev.tables.append(grid)
    for label, value in (
        ("relevance of the best chunk", details.relevance),
        ("question terms covered", details.coverage),
    ):
        if value is not None:
            ev.facts.append((label, fmt_score(value)))
    if details.missing_terms:
        ev.facts.append(("terms in no chunk", ", ".join(details.missing_terms)))
    if details.method:
        ev.facts.append(("method", details.method))
    if details.latency is not None:
        ev.facts.append(("judge latency", f"{details.latency:.2f} s"))


_KIND_TONES = {
    "correct, supported": "good",
    "self-knowledge": "accent",
    "noise, relevant chunk": "bad",
    "noise, irrelevant chunk": "bad",
    "hallucination": "bad",
}


def _chunk_list(claim: DiagnosticClaim) -> str:
    return ", ".join(f"#{i + 1}" for i in claim.supported_by) or "none"


def diagnostics_evidence(details: DiagnosticsDetails, texts: Texts, ev: Evidence) -> None:
    """Each answer claim with what it is (correct and supported, self-knowledge, noise from
    a relevant or an irrelevant chunk, hallucination), marked in the answer; the reference's
    claims; the relevant chunks noted; every share as a fact."""
    answer = Table(
        "Claims of the answer", ["#", "claim", "kind", "supported by", "in the reference", "reason"]
    )
    for n, claim in enumerate(details.answer_claims, 1):
        tone = _KIND_TONES.get(claim.kind or "", "")
        ev.mark("output", claim.claim, tone, f"claim {n}: {claim.kind}", str(n))
        answer.add(
            [
                str(n),
                clip(claim.claim, 2000),
                {"text": claim.kind or "—", "tone": tone},
                _chunk_list(claim),
                readable(claim.in_other == "yes"),
                clip(claim.reason, 2000) or "—",
            ],
            tone,
        )
    reference = Table(
        "Claims of the reference", ["#", "claim", "held by", "in the answer", "reason"]
    )
    for n, claim in enumerate(details.reference_claims, 1):
        stated = claim.in_other == "yes"
        reference.add(
            [
                str(n),
                clip(claim.claim, 2000),
                _chunk_list(claim),
                readable(stated),
                clip(claim.reason, 2000) or "—",
            ],
            "good" if stated else "bad" if claim.supported_by else "",
        )
    ev.tables += [t for t in (answer, reference) if t.rows]
    for i in details.relevant_chunks:
        ev.note(i, kind="value", label="relevant: holds a claim of the reference", value=None)
    if details.diagnostics is not None:
        for name, value in details.diagnostics.model_dump().items():
            ev.facts.append((name.replace("_", " "), fmt_score(value)))
    if details.abstention:
        ev.facts.append(("abstains", details.abstention.replace("_", " ")))
    if details.method:
        ev.facts.append(("method", details.method))
    if details.latency is not None:
        ev.facts.append(("judge latency", f"{details.latency:.2f} s"))


READERS[CitationsDetails] = citations_evidence
READERS[DiagnosticsDetails] = diagnostics_evidence
READERS[SufficiencyDetails] = sufficiency_evidence
