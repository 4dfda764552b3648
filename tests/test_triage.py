"""Triage: the calibrated offline scorer decides the items outside a metric's band, the
judge (a fake OpenAI-compatible server on 127.0.0.1, counting calls) the rest."""

import json

import pytest

from contextlens import evaluate
from contextlens.metrics.context_precision import ContextPrecisionScorer
from contextlens.metrics.faithfulness import FaithfulnessMetric
from contextlens.offline.triage import bundled_band
from contextlens.schemas import TriageBand
from contextlens.testing import FakeOpenAIServer
from support import blocks
from support.rag import CHUNKS, rule_reply

CASES = [
    {
        "id": "loans",
        "input": "How many books can members borrow?",
        "actual_output": "Members can borrow up to five books for three weeks.",
        "retrieval_context": CHUNKS,
    },
    {
        "id": "founded",
        "input": "Who founded the library?",
        "actual_output": "It was founded in 1901 by the town council.",
        "retrieval_context": CHUNKS,
    },
    {
        "id": "cafe",
        "input": "Is there a cafe?",
        "actual_output": "It has a rooftop cafe serving espresso and sushi every night.",
        "retrieval_context": CHUNKS,
    },
    {
        "id": "hours",
        "input": "When is the library open?",
        "actual_output": "Monday to Friday, 9am to 6pm. It opens on weekends too.",
        "retrieval_context": CHUNKS,
    },
]


@pytest.fixture(scope="module")
def offline():
    """Each case's offline faithfulness score (no judge)."""
    run = evaluate(CASES, [FaithfulnessMetric()], cache=False, progress=False)
    return {item.case_id: item.score for item in run.results}


def band_around(offline):
    """A band that leaves the lowest and the highest offline score outside it."""
    ordered = sorted(offline.values())
    return TriageBand(lower=ordered[0] + 1e-4, upper=ordered[-1] - 1e-4)


def extremes(offline):
    ordered = sorted(offline, key=offline.get)
    return {ordered[0], ordered[-1]}


def test_items_outside_the_band_make_no_call_and_each_result_says_who_decided(offline, tmp_path):
    metric = FaithfulnessMetric(triage_band=band_around(offline))
    outside = extremes(offline)
    with FakeOpenAIServer(reply=rule_reply) as server:
        run = evaluate(
            CASES,
            [metric],
            judge=f"{server.base_url}#j",
            cache=False,
            progress=False,
            triage=True,
            out=tmp_path,
        )
        calls = server.calls
        answers = [
            a for r in server.requests for a in blocks(r["messages"][1]["content"], "output")
        ]
    assert calls == len(CASES) - len(outside)
    for case in CASES:  # the judge saw exactly the items inside the band
        assert (case["actual_output"] in answers) == (case["id"] not in outside)
    for item in run.results:
        assert item.triage.offline_score == pytest.approx(offline[item.case_id], abs=1e-6)
        if item.case_id in outside:
            assert item.triage.decided_by == "offline" and item.judge == "offline"
            assert item.score == pytest.approx(offline[item.case_id])
            assert item.triage.why.startswith("outside the band")
        else:
            assert item.triage.decided_by == "judge" and item.judge.startswith("openai-compat")
            assert item.details.method == "judge"
    written = (tmp_path / "latest" / "results.jsonl").read_text().split("\n")
    lines = [json.loads(s) for s in written if s]
    assert {r["case_id"]: r["triage"]["decided_by"] for r in lines} == {
        c["id"]: "offline" if c["id"] in outside else "judge" for c in CASES
    }
    triage = run.summaries["faithfulness"].triage
    assert (triage.n_offline, triage.n_judged, triage.n_inside_band) == (2, 2, 2)
    assert triage.band == metric.triage_band() and triage.share_judged == 0.5
    # what the two offline decisions saved, counted as a dry run counts, not as spent
    assert triage.saved_calls == 2 and triage.saved_prompt_tokens > 100
    assert run.accounting.total.calls == calls
    summary = json.loads((tmp_path / "latest" / "summary.json").read_text())
    assert summary["summaries"]["faithfulness"]["triage"]["saved_calls"] == 2
    assert summary["config"]["triage"] is True


def test_without_triage_every_item_is_judged(offline):
    metric = FaithfulnessMetric(triage_band=band_around(offline))
    with FakeOpenAIServer(reply=rule_reply) as server:
        run = evaluate(CASES, [metric], judge=f"{server.base_url}#j", cache=False, progress=False)
        assert server.calls == len(CASES)
    assert all(item.triage is None for item in run.results)
    assert run.summaries["faithfulness"].triage is None


def test_an_item_the_offline_scorer_cannot_read_always_goes_to_the_judge():
    german = {
        "id": "de",
        "input": "Wie viele Bücher darf man ausleihen?",
        "actual_output": "Mitglieder dürfen bis zu fünf Bücher für drei Wochen ausleihen.",
        "retrieval_context": [
            "Mitglieder dürfen bis zu fünf Bücher für drei Wochen ausleihen.",
            "Die Bibliothek ist montags bis freitags von 9 bis 18 Uhr geöffnet.",
        ],
    }
    # a band of one point: every English item with a score would be decided offline
    metric = FaithfulnessMetric(triage_band=(0.5, 0.5))
    with FakeOpenAIServer(reply=rule_reply) as server:
        run = evaluate(
            [german, CASES[2]],
            [metric],
            judge=f"{server.base_url}#j",
            cache=False,
            progress=False,
            triage=True,
        )
        assert server.calls == 1
    by_id = {item.case_id: item for item in run.results}
    assert by_id["de"].triage.decided_by == "judge"
    assert by_id["de"].triage.why.startswith("offline:") and by_id["de"].score is not None
    assert by_id["cafe"].triage.decided_by == "offline"
    assert run.summaries["faithfulness"].triage.n_offline_cannot == 1


def test_a_metric_without_a_calibrated_offline_scorer_is_judged_and_says_so():
    assert ContextPrecisionScorer().triage_band() is None
    cases = [{**c, "expected_output": c["actual_output"]} for c in CASES[:2]]
    with FakeOpenAIServer(reply=rule_reply) as server:
        run = evaluate(
            cases,
            ["context-precision", FaithfulnessMetric(triage_band=(0.0, 1.0))],
            judge=f"{server.base_url}#j",
            cache=False,
            progress=False,
            triage=True,
        )
    faithfulness = run.summaries["faithfulness"]
    assert faithfulness.accounting.calls == 2  # a band of [0, 1] sends every item to the judge
    assert run.summaries["context-precision"].accounting.calls >= 2
    assert all(i.triage is None for i in run.results if i.metric == "context-precision")
    precision = run.summaries["context-precision"].triage
    assert precision.band is None and "no calibrated offline scorer" in precision.note
    assert "every item judged" in precision.line()
    assert run.summaries["faithfulness"].triage.n_judged == 2


def test_triage_without_a_judge_is_an_error():
    with pytest.raises(ValueError, match=r"triage .* give judge="):
        evaluate(CASES, [FaithfulnessMetric()], cache=False, progress=False, triage=True)


def test_a_dry_run_with_triage_estimates_the_share_judged(offline):
    metric = FaithfulnessMetric(triage_band=band_around(offline))
    with FakeOpenAIServer(reply=rule_reply) as server:
        estimate = evaluate(
            CASES, [metric], judge=f"{server.base_url}#j", cache=False, triage=True, dry_run=True
        )
        assert server.calls == 0
    [row] = estimate.metrics
    assert (row.calls, row.triage_judged, row.triage_offline) == (2, 2, 2)
    assert "triage: 2 of 4 items to the judge (50%)" in str(estimate)


def test_bands_are_checked_and_the_claim_metrics_have_a_measured_default():
    default = bundled_band("features")
    assert default is not None and 0.0 <= default.lower <= 0.5 <= default.upper <= 1.0
    assert FaithfulnessMetric().triage_band() == default
    with pytest.raises(ValueError, match=r"lower 0\.9 is above its upper 0\.1"):
        FaithfulnessMetric(triage_band=(0.9, 0.1))
    assert TriageBand.model_validate((0.2, 0.8)).decides(0.1)
    assert not TriageBand(lower=0.2, upper=0.8).decides(0.2)


def test_the_command_takes_triage_and_refuses_it_without_a_judge(run_cli, tmp_path, offline):
    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(json.dumps(c) for c in CASES))
    code, text = run_cli("run", data, "-m", "faithfulness", "--triage")
    assert code == 2 and "give --judge" in text, text
    code, text = run_cli("run", data, "-m", "faithfulness", "--triage-band", "faithfulness=0:1")
    assert code == 2 and "add --triage" in text, text
    band = band_around(offline)
    with FakeOpenAIServer(reply=rule_reply) as server:
        spec = f"{server.base_url}#j"
        code, text = run_cli(
            "run", data, "-m", "context-precision", "--judge", spec, "--triage",
            "--triage-band", "context-precision=0.1:0.9",
        )  # fmt: skip
        assert code == 2 and "no calibrated offline scorer" in text, text
        code, text = run_cli(
            "run", data, "-m", "faithfulness", "--judge", spec, "--triage", "--triage-band",
            f"faithfulness={band.lower}:{band.upper}", "--out", tmp_path / "o", "--cache",
            "off", "--no-store",
        )  # fmt: skip
        assert code == 0, text
        assert server.calls == 2
    said = " ".join(text.split())  # the table's legend wraps
    assert "2 of 4 decided offline" in said and "saved 2 calls" in said
