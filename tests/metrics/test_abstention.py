"""An answer that makes no checkable claim is not applicable to the claim metrics and to
``context`` offline: counted and shown, never scored 0 and never left out silently."""

import asyncio
import json

import pytest

from contextlens import evaluate
from contextlens.calibration import calibrate
from contextlens.embeddings.adapters import as_embedder
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Services
from contextlens.metrics.context import ContextAwareness
from contextlens.metrics.context_recall import ContextRecallMetric
from contextlens.metrics.faithfulness import FaithfulnessMetric
from contextlens.report import render_report
from contextlens.schemas import Batch, Dataset, ModelTestCase
from contextlens.testing import FakeOpenAIServer

CHUNKS = [
    "Limescale damage is not covered by the warranty.",
    "Returns are accepted within 30 days with a receipt.",
]
ANSWERS = {
    "refusal": "I'm sorry, I can only help with TechStore orders.",
    "idk": "I don't know.",
    "greeting": "Hello! How can I help you today?",
    "hedged": "I'm not sure, but returns are accepted within 30 days.",
    "negative": "No, limescale damage is not covered.",
}
ABSTAINS = "not applicable: the answer abstains"


def cases():
    return [
        ModelTestCase(
            name=name, input="Is limescale covered?", actual_output=a, retrieval_context=CHUNKS
        )
        for name, a in ANSWERS.items()
    ]


def offline():
    return Services(judge=None, embedder=as_embedder(None))


def test_faithfulness_says_an_abstaining_answer_is_not_applicable():
    metric = FaithfulnessMetric()
    for name in ("refusal", "idk", "greeting"):
        case = next(c for c in cases() if c.name == name)
        result = asyncio.run(metric.score(case, offline()))
        assert result.score is None and result.error is None and result.success is None
        assert result.not_applicable == ABSTAINS, name
        assert "makes no checkable claim" in result.reason
        assert result.details.abstention is not None
    refusal = asyncio.run(metric.score(cases()[0], offline()))
    assert "an out-of-scope reply" in refusal.reason
    for name in ("hedged", "negative"):  # a claim after a hedge, a "No, ..." answer
        case = next(c for c in cases() if c.name == name)
        result = asyncio.run(metric.score(case, offline()))
        assert result.not_applicable is None and result.score is not None, name
        assert result.details.claims


def test_evaluate_counts_the_abstaining_answers_apart_from_the_mean(tmp_path):
    run = evaluate(cases(), ["faithfulness"], out=tmp_path / "out", progress=False)
    items = {i.case_id: i for i in run.iter_results()}
    for name in ("refusal", "idk", "greeting"):
        assert items[name].status == "not applicable"
        assert items[name].not_applicable == ABSTAINS and items[name].score is None
        assert "makes no checkable claim" in items[name].reason
    scored = [items["hedged"].score, items["negative"].score]
    assert all(s is not None for s in scored)
    summary = run.summary("faithfulness")
    assert (summary.n, summary.n_scored, summary.n_failed) == (5, 2, 0)
    assert summary.n_not_applicable == 3  # counted, not skipped silently
    assert summary.mean == pytest.approx(sum(scored) / 2)
    folder = tmp_path / "out" / "latest"
    written = json.loads((folder / "summary.json").read_text())["summaries"]["faithfulness"]
    assert written["n_not_applicable"] == 3
    lines = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]
    assert sum(x["not_applicable"] == ABSTAINS for x in lines) == 3
    report = render_report(run)
    assert "3 n/a" in report and ABSTAINS in report


def test_the_run_table_shows_the_not_applicable_items(run_cli, tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in cases()))
    code, text = run_cli("run", path, "-m", "faithfulness", "--out", tmp_path / "o", "--no-store")
    assert code == 0, text
    assert "5 (3 n/a)" in text


def test_a_judge_that_lists_no_claim_makes_the_item_not_applicable():
    with FakeOpenAIServer(reply=lambda _: '{"claims": []}') as server:
        services = Services(judge=resolve_judge(f"{server.base_url}#j"), embedder=as_embedder(None))
        result = asyncio.run(FaithfulnessMetric().score(cases()[1], services))
        run = evaluate(cases()[:2], [FaithfulnessMetric(judge=f"{server.base_url}#j")])
    assert result.score is None and result.error is None
    assert result.not_applicable == ABSTAINS and result.details.abstention == "no claim"
    summary = run.summary("faithfulness")
    assert (summary.n_not_applicable, summary.n_failed, summary.mean) == (2, 0, None)


def test_context_recall_names_the_reference_answer():
    case = ModelTestCase(input="q", expected_output="I don't know.", retrieval_context=CHUNKS)
    result = asyncio.run(ContextRecallMetric().score(case, offline()))
    assert result.not_applicable == "not applicable: the reference answer abstains"


def session(*replies):
    return Dataset(
        session_id="s",
        assistant_id="bot",
        context="Returns are accepted within 30 days with a receipt. Support: Mon-Fri 9am-5pm.",
        conversation=[
            Batch(qa_id=f"q{i}", query="Can I return it?", assistant=r)
            for i, r in enumerate(replies, start=1)
        ],
    )


def test_context_leaves_an_abstaining_interaction_out_and_counts_it():
    claim = "Returns are accepted within 30 days with a receipt."
    mixed = asyncio.run(ContextAwareness().score(session(claim, ANSWERS["idk"]), offline()))
    first, second = mixed.details.interactions
    assert first.score is not None and second.score is None and second.error is None
    assert second.not_applicable == ABSTAINS and second.abstention == "does not know"
    assert mixed.details.n_not_applicable == 1 and mixed.details.n_failed == 0
    assert mixed.score == pytest.approx(first.score)
    assert "1 of 2 interactions not applicable" in mixed.reason
    only = asyncio.run(
        ContextAwareness().score(session(ANSWERS["greeting"], ANSWERS["refusal"]), offline())
    )
    assert only.score is None and only.error is None and only.not_applicable == ABSTAINS
    run = evaluate([session(ANSWERS["greeting"])], ["context"], progress=False)
    assert run.summary("context").n_not_applicable == 1


def test_calibrate_counts_an_abstaining_row_apart_from_the_failures():
    rows = [
        {"id": "r", "question": "q", "answer": ANSWERS["refusal"], "contexts": CHUNKS, "label": 0},
        {"id": "n", "question": "q", "answer": ANSWERS["negative"], "contexts": CHUNKS, "label": 1},
        {
            "id": "h",
            "question": "q",
            "answer": "Limescale is covered.",
            "contexts": CHUNKS,
            "label": 0,
        },
    ]
    report = calibrate(rows, "faithfulness", cache=False, progress=False)
    assert (report.n_rows, report.n, report.n_failed, report.n_not_applicable) == (3, 2, 0, 1)
    [refusal] = [i for i in report.items if i.id == "r"]
    assert refusal.not_applicable == ABSTAINS and refusal.score is None and refusal.error is None
    assert "1 not applicable" in report.to_table()[0]["note"]
