"""Each details type as evidence laid over its case: claims marked in their text with the
closest sentence of their chunk, verdicts by rank, ranked ids with the relevant ones marked,
and a details type without a reader as tables and labelled values; JSON nowhere."""

from __future__ import annotations

import json

from contextlens import Batch, Context, Dataset, ModelTestCase, evaluate
from contextlens.metrics.claims import ClaimVerdict
from contextlens.metrics.context_precision_ranked import ChunkVerdict, RankedPrecisionDetails
from contextlens.metrics.context_recall import ContextRecallDetails
from contextlens.metrics.contextual_relevancy import RelevancyDetails, StatementVerdict
from contextlens.metrics.faithfulness import FaithfulnessDetails
from contextlens.metrics.retrieval import RetrievalDetails, RetrievalMeasures
from contextlens.report.cases import case_table
from contextlens.report.evidence import closest_sentence, evidence_of
from contextlens.schemas import MetricDetails

CHUNKS = [
    "Opening hours: 9 am to 5 pm. Parking is free for customers.",
    "Returns are accepted within 30 days.",
]
CASE = ModelTestCase(
    input="When do you open, and is parking free?",
    actual_output="We open at 9 am. Parking costs $5.",
    expected_output="9 am; parking is free.",
    retrieval_context=CHUNKS,
    retrieved_ids=["hours", "returns"],
    relevant_ids={"hours": 2, "parking": 1},
)


def _cells(table: dict) -> list[list[str]]:
    return [[c if isinstance(c, str) else c["text"] for c in row] for row in table["rows"]]


def test_claims_are_marked_in_their_text_and_their_closest_sentence_in_its_chunk() -> None:
    details = FaithfulnessDetails(
        claims=[
            ClaimVerdict(claim="We open at 9 am.", verdict="yes", chunk=0, reason="stated"),
            ClaimVerdict(claim="Parking costs $5.", verdict="no", chunk=0, reason="it is free"),
            ClaimVerdict(claim="Cats are welcome.", verdict="no", chunk=None, reason="no chunk"),
        ],
        supported=1,
        total=3,
    )
    ev = evidence_of(details, CASE).to_json()
    on_answer = [(m["text"], m["tone"], m["tag"]) for m in ev["marks"] if m["on"] == "output"]
    assert on_answer == [
        ("We open at 9 am.", "good", "1"),
        ("Parking costs $5.", "bad", "2"),
        ("Cats are welcome.", "bad", "3"),
    ]
    on_chunk = [(m["text"], m["tag"]) for m in ev["marks"] if m["on"] == "chunk:0"]
    assert on_chunk == [
        ("Opening hours: 9 am to 5 pm.", "1"),
        ("Parking is free for customers.", "2"),
    ]
    notes = ev["chunks"]["0"]
    assert [(n["kind"], n["n"], n["verdict"]) for n in notes] == [
        ("claim", 1, "yes"),
        ("claim", 2, "no"),
    ]
    assert "1" not in ev["chunks"]  # no claim points to the second chunk
    [table] = ev["tables"]
    assert table["title"] == "Claims of the answer"
    assert _cells(table)[2][:5] == ["3", "Cats are welcome.", "not supported", "—", "none"]
    assert table["tones"] == ["good", "bad", "bad"]
    assert ["supported claims", "1 of 3"] in ev["facts"]

    recall = ContextRecallDetails(
        claims=[ClaimVerdict(claim="9 am; parking is free.", verdict="yes", chunk=0, reason="")]
    )
    marks = evidence_of(recall, CASE).to_json()["marks"]
    assert marks[0]["on"] == "expected"  # the reference answer's claims are on it


def test_the_closest_sentence_shares_the_most_words() -> None:
    assert closest_sentence("Parking costs $5.", CHUNKS[0]) == "Parking is free for customers."
    assert closest_sentence("Dogs bark.", CHUNKS[1]) is None


def test_ranked_verdicts_are_on_their_chunks_in_rank_order() -> None:
    details = RankedPrecisionDetails(
        verdicts=[
            ChunkVerdict(chunk=1, verdict="no", reason="about returns", usefulness=0.1),
            ChunkVerdict(chunk=0, verdict="yes", reason="the hours", usefulness=0.9, merged=[0, 1]),
        ],
        useful=1,
        chunks=2,
        against="expected_output",
    )
    ev = evidence_of(details, CASE).to_json()
    assert [(k, n[0]["rank"], n[0]["verdict"]) for k, n in ev["chunks"].items()] == [
        ("0", 1, "yes"),
        ("1", 2, "no"),
    ]
    [table] = ev["tables"]
    assert table["columns"] == ["rank", "useful", "usefulness", "merged with", "reason"]
    assert _cells(table) == [
        ["#1", "useful", "0.900", "#2", "the hours"],
        ["#2", "not useful", "0.100", "—", "about returns"],
    ]
    assert ["usefulness judged against", "the expected output"] in ev["facts"]


def test_retrieval_marks_the_relevant_ids_on_the_list_and_names_the_missing() -> None:
    details = RetrievalDetails(
        measure="ndcg",
        measures=RetrievalMeasures(
            k=1, hit_rate=1.0, recall=0.5, precision=1.0, mrr=1.0, ndcg=0.8, map=0.5
        ),
        relevance_level=1.0,
        retrieved=2,
        relevant=2,
        relevant_retrieved=1,
        first_relevant_rank=1,
        missing=["parking"],
    )
    ev = evidence_of(details, CASE).to_json()
    measures, ranked = ev["tables"]
    assert measures["columns"][4] == "nDCG@1" and _cells(measures)[0][4] == "0.800 (the score)"
    assert ranked["columns"][-1] == "in the top 1"
    assert _cells(ranked) == [
        ["#1", "hours", "relevant", "2", "yes"],
        ["#2", "returns", "not judged", "—", "no"],
        ["—", "parking", "relevant, not retrieved", "1", "no"],
    ]
    assert ranked["tones"] == ["good", "", "bad"]
    assert ev["chunks"]["0"] == [
        {"kind": "hit", "id": "hours", "relevant": True, "grade": 2.0, "within": True}
    ]
    assert ["relevant ids not retrieved", "parking"] in ev["facts"]


def test_a_statement_is_marked_only_when_it_is_part_of_its_chunk() -> None:
    details = RelevancyDetails(
        verdicts=[
            StatementVerdict(
                chunk=0, statement="Parking is free for customers.", verdict="no", reason=""
            ),
            StatementVerdict(chunk=1, statement=CHUNKS[1], verdict="no", reason=""),
        ]
    )
    marks = evidence_of(details, CASE).to_json()["marks"]
    assert [(m["on"], m["tone"]) for m in marks] == [("chunk:0", "bad")]


def test_a_details_type_without_a_reader_is_tables_and_labelled_values() -> None:
    own = MetricDetails(
        steps=[{"name": "lookup", "ok": True, "took": {"ms": 3}}, {"name": "compare"}],
        weights={"lookup": 0.25},
        tags=["a", "b"],
        language="fr",
        note=None,
    )
    ev = evidence_of(own).to_json()
    [steps] = ev["tables"]
    assert steps["columns"] == ["name", "ok", "took"]
    assert _cells(steps) == [["lookup", "yes", "ms: 3"], ["compare", "", ""]]
    assert ev["facts"] == [["weights · lookup", "0.250"], ["tags", "a, b"], ["language", "fr"]]


def test_no_evidence_of_any_metric_is_json() -> None:
    cases: list[Dataset | ModelTestCase] = [
        CASE,
        Dataset(
            session_id="s",
            assistant_id="bot",
            context="Open 9 am to 5 pm.",
            conversation=[Batch(qa_id="q1", query="When?", assistant="At 9 am. Free cake.")],
        ),
    ]
    metrics = [
        "faithfulness",
        "context-recall",
        "contextual-relevancy",
        "context-precision-ranked",
        "context-precision",
        "context-similarity",
        "retrieval",
        Context(),
    ]
    run = evaluate(cases, metrics, cache=False, progress=False)
    table = case_table(run, list(run.summaries))
    results = [r for d in table.details() for r in d["metrics"]]
    assert len(results) == 8
    for result in results:
        shown = [
            *(v for fact in result.get("facts", []) for v in fact),
            *(
                c if isinstance(c, str) else c["text"]
                for t in result.get("tables", [])
                for row in t["rows"]
                for c in row
            ),
        ]
        assert shown, result["metric"]
        assert all(isinstance(v, str) and '{"' not in v and "[" not in v for v in shown), shown
    assert json.dumps(results)  # and it all goes into the page's JSON blocks


def test_a_claim_resting_on_a_tool_output_shows_the_tool_as_its_evidence() -> None:
    tool = "tools_called[0] (weather)"
    details = FaithfulnessDetails(
        claims=[ClaimVerdict(claim="It rains.", verdict="yes", chunk=None, reason="", tool=tool)],
        supported=1,
        total=1,
    )
    ev = evidence_of(details, CASE).to_json()
    table, tools = ev["tables"]
    assert _cells(table)[0][4] == f"tool output {tool}"
    assert tools["title"] == "Tool use" and _cells(tools)[0][0] == tool
    assert ["claims resting on a tool output", "1 of 1"] in ev["facts"]
    assert "chunks" not in ev  # no chunk note for a claim resting on a tool
