"""The report's case explorer: each case's fields and each metric's evidence laid over
them, statuses against the pass marks, meta fields and slice tables, and a page of 10,000
cases that stays small and quick to make."""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser

import numpy as np
import pytest

from contextlens.cases import CaseRecord
from contextlens.metrics.context import ContextDetails, Interaction
from contextlens.metrics.context_precision import PrecisionDetails
from contextlens.report import render_report
from contextlens.report.cases import case_table, run_mode
from contextlens.report.evidence import MAX_TEXT, evidence_of
from contextlens.results import EvalRun, ItemResult, MetricSummary
from contextlens.runner import evaluate
from contextlens.schemas import Batch, Dataset, MetricDetails, ModelTestCase
from contextlens.stats import BayesianMode, FrequentistMode
from support.runs import RELEVANCY, SIMILARITY, synthetic_run

HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"


class Blocks(HTMLParser):
    """The JSON blocks of a page by id, and its start tags."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: dict[str, str] = {}
        self.tags: list[str] = []
        self._id: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        self._id = found.get("id") if found.get("type") == "application/json" else None

    def handle_endtag(self, tag: str) -> None:
        self._id = None

    def handle_data(self, data: str) -> None:
        if self._id is not None:
            self.blocks[self._id] = self.blocks.get(self._id, "") + data

    def json(self, block: str) -> dict:
        return json.loads(self.blocks[block])


def test_a_case_shows_its_fields_chunks_and_each_metrics_evidence() -> None:
    page = Blocks(render_report(synthetic_run(10)))
    rows = page.json("cl-rows")
    assert rows["metrics"] == [RELEVANCY, SIMILARITY]
    at = [r[0] for r in rows["rows"]].index("case-00003")
    detail = page.json(f"cl-case-{at}")
    assert detail["input"].startswith("Question 3") and detail["expected"] == "We open at 9 am."
    assert detail["chunks"] == ["Opening hours of shop 3: 9 am to 5 pm.", "Parking is free."]
    assert detail["meta"] == {"domain": "hours", "tier": "silver"}
    relevancy, similarity = detail["metrics"]
    statement = relevancy["chunks"]["1"][0]
    assert statement["kind"] == "statement" and statement["text"] == "Parking is free."
    assert statement["verdict"] in ("yes", "no") and "parking" in statement["reason"]
    # case 3 is one of those the similarity metric could not score: its reply is kept
    assert similarity["status"] == "failed" and similarity["score"] is None
    assert similarity["raw_reply"] == "Sure! Here is my verdict: maybe"
    assert "not JSON" in similarity["error"]


def test_both_sides_similarities_are_laid_over_their_chunks() -> None:
    run = synthetic_run(2)
    page = Blocks(render_report(run))
    detail = page.json("cl-case-0")
    notes = detail["metrics"][1]["chunks"]
    item = next(r for r in run.results if r.metric == SIMILARITY and r.case_id == "case-00000")
    q = item.details.query_context_similarity.contexts_score
    a = item.details.answer_context_similarity.contexts_score
    assert [(n["label"], n["value"]) for n in notes["0"]] == [
        ("query similarity", q[0]),
        ("answer similarity", a[0]),
    ]
    assert [n["value"] for n in notes["1"]] == [q[1], a[1]]
    facts = dict(detail["metrics"][1]["facts"])
    assert facts["harmonic mean"] == f"{item.details.score:.3f}"


def test_skipped_blank_chunks_keep_the_others_in_place() -> None:
    from contextlens.metrics.context_similarity import SideSimilarity, SimilarityDetails

    details = SimilarityDetails(
        query_context_similarity=SideSimilarity(contexts_score=[0.9, 0.7], score=0.8),
        skipped_contexts=[1],
    )
    ev = evidence_of(details, ModelTestCase(input="q", retrieval_context=["a", " ", "c"]))
    assert [n["value"] for n in ev.chunks[0]] == [0.9]
    assert [n["label"] for n in ev.chunks[1]] == ["skipped: blank"]
    assert [n["value"] for n in ev.chunks[2]] == [0.7]


def test_a_session_shows_every_turn_with_its_score_and_reason() -> None:
    session = Dataset(
        session_id="s1",
        assistant_id="bot",
        context="Open 9 am to 5 pm.",
        conversation=[
            Batch(qa_id="q1", query="When?", assistant="At 9 am."),
            Batch(qa_id="q2", query="Sunday?", assistant="Always open."),
        ],
        meta={"channel": "chat"},
    )
    details = ContextDetails(
        n_interactions=2,
        n_failed=1,
        interactions=[
            Interaction(qa_id="q1", score=0.9, reason="follows the context", weight=0.5),
            Interaction(qa_id="q2", score=None, error="bad reply", raw_reply="{oops", weight=0.5),
        ],
    )
    run = EvalRun(
        run_id="r",
        started_at="",
        duration_s=0,
        judge="j",
        embedder="e",
        repeats=1,
        summaries={
            "context": MetricSummary(metric="context", n=1, n_scored=1, n_failed=0, mean=0.9)
        },
        accounting={},
        results=[ItemResult(case_id="s1", metric="context", score=0.9, details=details)],
    ).with_cases([CaseRecord(case_id="s1", case=session)])
    page = Blocks(render_report(run))
    detail = page.json("cl-case-0")
    assert detail["kind"] == "session" and detail["system_context"] == "Open 9 am to 5 pm."
    assert [t["query"] for t in detail["turns"]] == ["When?", "Sunday?"]
    turns = detail["metrics"][0]["turns"]
    assert turns["q1"] == {"score": 0.9, "reason": "follows the context", "weight": 0.5}
    assert turns["q2"]["error"] == "bad reply" and turns["q2"]["raw_reply"] == "{oops"


def test_precision_components_and_an_unknown_details_type_are_shown() -> None:
    ev = evidence_of(PrecisionDetails(components={"coverage": 0.25, "precision": 0.75}))
    assert ev.facts == [("coverage", "0.250"), ("precision", "0.750")]

    class OwnDetails(MetricDetails):
        hops: int = 0
        path: tuple[str, ...] = ()

    own = evidence_of(OwnDetails(hops=3, path=["a", "b"], attempts=2))
    assert ("hops", "3") in own.facts and ("path", "a, b") in own.facts
    assert ("judge attempts", "2") in own.facts


def test_statuses_follow_the_pass_marks_the_run_set() -> None:
    run = synthetic_run(20)
    table = case_table(run, list(run.summaries))
    assert table.pass_marks == {RELEVANCY: 0.5, SIMILARITY: 0.8}
    at = table.metrics.index(SIMILARITY)
    for row in table.rows():
        score, status = row[1][at], row[2][at]
        if status == "failed":
            assert score is None
        else:
            assert status == ("pass" if score >= 0.8 else "below")
    cases = [
        ModelTestCase(
            name=f"c{i}",
            input="When do you open?",
            actual_output=f"At {8 + i} am.",
            retrieval_context=[f"We open at {8 + i} am.", "Parking is free."],
        )
        for i in range(4)
    ]
    for mark, expected in ((0.0, {"pass"}), (1.0, {"below"})):
        made = evaluate(
            cases,
            ["context-similarity"],
            thresholds={"ContextSimilarityEvaluator": mark},
            cache=False,
            progress=False,
        )
        strict = case_table(made, list(made.summaries))
        assert strict.pass_marks == {SIMILARITY: mark}
        assert {r[2][0] for r in strict.rows()} == expected


def test_items_not_applicable_or_not_run_have_their_own_status() -> None:
    items = [
        ItemResult(case_id="a", metric="m", score=0.9, success=True),
        ItemResult(case_id="b", metric="m", score=0.1, success=False),
        ItemResult(case_id="c", metric="m", score=None, error="JudgeError: x"),
        ItemResult(case_id="d", metric="m", score=None, not_applicable="no retrieved context"),
        ItemResult(case_id="e", metric="m", score=None, not_run="not run: the cost cap"),
        ItemResult(case_id="f", metric="m", score=0.4),
    ]
    run = EvalRun(
        run_id="r",
        started_at="",
        duration_s=0,
        judge="j",
        embedder="e",
        repeats=1,
        summaries={},
        accounting={},
        results=items,
    )
    table = case_table(run, ["m"])
    assert [r[2][0] for r in table.rows()] == [
        "pass", "below", "failed", "not applicable", "not run", "scored",
    ]  # fmt: skip
    assert [r[1][0] for r in table.rows()] == [0.9, 0.1, None, None, None, 0.4]
    details = {d["id"]: d["metrics"][0] for d in table.details()}
    assert details["d"]["why_not"] == "no retrieved context"
    assert details["e"]["why_not"] == "not run: the cost cap"
    assert details["a"]["why_not"] is None


def test_slices_give_the_mean_interval_and_n_of_each_meta_value() -> None:
    run = synthetic_run(40)
    table = case_table(run, list(run.summaries))
    assert table.meta_fields == {
        "domain": sorted(["billing", "shipping", "returns", "hours"]),
        "tier": ["gold", "silver"],
    }
    [gold] = [s for s in table.slices["tier"] if s["value"] == "gold"]
    at = table.metrics.index(RELEVANCY)
    scores = [
        r.score for r in run.results if r.metric == RELEVANCY and int(r.case_id[-5:]) % 5 == 0
    ]
    got = gold["metrics"][at]
    assert gold["cases"] == 8 and got["n"] == len(scores) == 8
    assert got["mean"] == pytest.approx(np.mean(scores))
    # the run recorded no mode of its own: the engine's default, as its summaries were made
    mode = BayesianMode()
    est = mode.estimate(np.array(scores), np.ones(8), key=f"tier=gold/{RELEVANCY}")
    assert (got["low"], got["high"]) == (est.ci_low, est.ci_high)
    assert got["low"] <= got["mean"] <= got["high"] and got["note"] is None
    passed = [s >= 0.5 for s in scores]
    assert got["pass"] == pytest.approx(np.mean(passed))
    # a pass rate's interval is the mode's rate (a Beta posterior), as in the summaries
    rate = mode.rate(sum(passed), 8, key=f"tier=gold/{RELEVANCY}:pass")
    assert (got["pass_low"], got["pass_high"]) == (rate.ci_low, rate.ci_high)


def _sliced(scores: list[float], mark: float | None = 0.5, config: dict | None = None) -> dict:
    """The one slice of a run whose cases all share ``meta``, scored ``scores``."""
    items = [
        ItemResult(
            case_id=f"c{i}",
            metric="m",
            score=score,
            success=None if mark is None else score >= mark,
        )
        for i, score in enumerate(scores)
    ]
    cases = [
        CaseRecord(case_id=f"c{i}", case=ModelTestCase(input="q", meta={"k": "v"}))
        for i in range(len(scores))
    ]
    run = EvalRun(
        run_id="r",
        started_at="",
        duration_s=0,
        judge="j",
        embedder="e",
        repeats=1,
        summaries={
            "m": MetricSummary(
                metric="m",
                n=len(scores),
                n_scored=len(scores),
                n_failed=0,
                mean=0.5,
                threshold=mark,
            )
        },
        accounting={},
        config=config or {},
        results=items,
    ).with_cases(cases)
    [sliced] = case_table(run, ["m"]).slices["k"]
    return sliced["metrics"][0]


def test_a_slice_never_shows_a_zero_width_interval() -> None:
    # every item below its pass mark: 0% with the Beta interval, not "0% [0%, 0%]"
    none_pass = _sliced([0.2, 0.2, 0.2])
    assert none_pass["pass"] == 0.0 and none_pass["pass_low"] == 0.0
    assert none_pass["pass_high"] > 0.3
    # alike scores: no interval from the bootstrap, which only reweights them
    alike = _sliced([0.2, 0.2, 0.2])
    assert alike["mean"] == pytest.approx(0.2) and alike["low"] is None and alike["high"] is None
    assert alike["note"] == "n too small"
    # alike 0/1 scores are a share: the share's interval
    hits = _sliced([1.0] * 6)
    expected = BayesianMode().rate(6, 6, key="k=v/m")
    assert (hits["low"], hits["high"]) == (expected.ci_low, expected.ci_high)
    assert hits["high"] - hits["low"] > 0.2
    # one item: its value and no interval
    one = _sliced([0.7])
    assert one["mean"] == pytest.approx(0.7) and one["low"] is None and one["note"] == "n = 1"
    assert one["pass"] == 1.0 and one["pass_low"] is None and one["pass_note"] == "n = 1"


def test_slices_use_the_statistical_mode_the_run_recorded() -> None:
    scores = [0.1, 0.4, 0.5, 0.9, 0.65]
    mode = BayesianMode(mc_samples=700, ci_level=0.8, rng_seed=3)
    got = _sliced(scores, config={"statistical_mode": repr(mode)})
    est = mode.estimate(np.array(scores), np.ones(5), key="k=v/m")
    assert (got["low"], got["high"]) == (est.ci_low, est.ci_high)
    rate = mode.rate(3, 5, key="k=v/m:pass")
    assert (got["pass_low"], got["pass_high"]) == (rate.ci_low, rate.ci_high)
    # a frequentist run has no intervals: its slices have none either
    plain = _sliced(scores, config={"statistical_mode": repr(FrequentistMode())})
    assert plain["mean"] == pytest.approx(np.mean(scores)) and plain["low"] is None
    assert plain["pass"] == pytest.approx(0.6) and plain["pass_low"] is None
    # a mode recorded by a run is rebuilt as it was
    made = evaluate(
        [ModelTestCase(input="q", actual_output="a", retrieval_context=["a"])],
        ["context-similarity"],
        statistical_mode=mode,
        cache=False,
        progress=False,
    )
    assert repr(run_mode(made)) == repr(mode)


def test_a_meta_field_with_many_values_is_filterable_but_not_sliced() -> None:
    cases = [
        CaseRecord(case_id=f"c{i}", case=ModelTestCase(input="q", meta={"user": f"u{i}"}))
        for i in range(60)
    ]
    items = [ItemResult(case_id=f"c{i}", metric="m", score=0.5) for i in range(60)]
    run = EvalRun(
        run_id="r",
        started_at="",
        duration_s=0,
        judge="j",
        embedder="e",
        repeats=1,
        summaries={},
        accounting={},
        results=items,
    ).with_cases(cases)
    table = case_table(run, [])
    assert table.meta_fields == {"user": []} and table.slices == {}


def test_hostile_text_in_cases_stays_data() -> None:
    run = synthetic_run(1)
    record = next(run.iter_cases())
    hostile = record.case.model_copy(
        update={"input": HOSTILE, "retrieval_context": [HOSTILE], "meta": {HOSTILE: HOSTILE}}
    )
    run.with_cases([CaseRecord(case_id=record.case_id, case=hostile)])
    html = render_report(run)
    assert "<script>alert(1)" not in html and "<img" not in html
    page = Blocks(html)
    assert [t for t in page.tags if t == "img"] == []
    detail = page.json("cl-case-0")
    assert detail["input"] == HOSTILE and detail["chunks"] == [HOSTILE]
    assert page.json("cl-rows")["rows"][0][3] == {HOSTILE: HOSTILE}


def test_very_long_texts_are_cut_in_the_page() -> None:
    run = synthetic_run(1)
    record = next(run.iter_cases())
    long = record.case.model_copy(update={"actual_output": "x" * (MAX_TEXT + 500)})
    run.with_cases([CaseRecord(case_id=record.case_id, case=long)])
    detail = Blocks(render_report(run)).json("cl-case-0")
    assert detail["output"].startswith("x" * MAX_TEXT)
    assert detail["output"].endswith("(500 more characters in cases.jsonl)")


def test_ten_thousand_cases_make_a_page_quickly_and_build_no_rows() -> None:
    run = synthetic_run(10_000)
    start = time.perf_counter()
    html = render_report(run)
    seconds = time.perf_counter() - start
    assert seconds < 30, seconds
    assert html.count("<tr") < 50  # no case row is in the page: the script builds them
    page = Blocks(html)
    assert len(page.json("cl-rows")["rows"]) == 10_000
    assert sum(1 for b in page.blocks if b.startswith("cl-case-")) == 10_000
    assert len(html) < 40_000_000


def test_a_session_turn_names_its_least_supported_claim_and_closest_context_sentence():
    from contextlens.runner import evaluate

    session = Dataset(
        session_id="shop",
        assistant_id="bot",
        context="The shop opens at 9 am. Returns are accepted within 30 days. Parking is free.",
        conversation=[
            Batch(
                qa_id="q1",
                query="Can I return a kettle?",
                assistant="Returns are accepted within 30 days. Shipping to Mars costs $400.",
            )
        ],
    )
    run = evaluate([session], ["context"], cache=False, progress=False)
    [turn] = run.results[0].details.interactions
    assert turn.claim == "Shipping to Mars costs $400."
    assert turn.claim_support is not None and turn.claim_support < 0.5
    assert turn.evidence in (
        "The shop opens at 9 am.",
        "Returns are accepted within 30 days.",
        "Parking is free.",
    )
    detail = Blocks(render_report(run)).json("cl-case-0")
    note = detail["metrics"][0]["turns"]["q1"]
    assert (note["claim"], note["evidence"]) == (turn.claim, turn.evidence)
