"""Who judges: a metric's own ``model=`` judges it; ``evaluate(judge=...)`` judges the others;
the run says which judge each metric used; making a metric changes no shared state."""

import json
from pathlib import Path

import pytest

from contextlens import (
    ContextPrecision,
    ContextSimilarityEvaluator,
    ContextualRelevancyMetric,
    ModelTestCase,
    evaluate,
)
from contextlens.engine.limiter import FOUND_BY_RAMP, RAMPING, limiter_for
from contextlens.judges import OpenAICompatBackend
from contextlens.report import write_report
from contextlens.testing import FakeOpenAIServer
from support.relevancy import reply_of, statements

CASES = [
    ModelTestCase(
        name=f"c{i}",
        input="When does the shop open?",
        actual_output="At 9 am.",
        expected_output="9 am",
        retrieval_context=["The shop opens at 9 am.", "Parking is free."],
    )
    for i in range(4)
]


def verdicts(request: dict) -> str:
    """The opening hours are relevant, the parking is not: half of it."""
    prompt = request["messages"][-1]["content"]
    if "Chunk 1:" in prompt:
        found = statements(prompt)
        return json.dumps(
            reply_of(["no" if "Parking" in text else "yes" for _, _, text in found], reason="Half.")
        )
    return json.dumps({"reason": "Matches.", "score": 0.8})


@pytest.fixture
def servers():
    with FakeOpenAIServer(reply=verdicts) as own, FakeOpenAIServer(reply=verdicts) as run:
        yield own, run


def test_a_metrics_own_judge_is_called_by_evaluate(servers):
    own, _ = servers
    run = evaluate(CASES, [ContextPrecision(model=f"{own.base_url}#own-model")], progress=False)
    assert own.calls == len(CASES)
    summary = run.summaries["context-precision"]
    assert summary.mean == pytest.approx(0.8) and summary.n_failed == 0
    assert summary.judge == "openai-compat:own-model"
    assert {item.judge for item in run.results} == {"openai-compat:own-model"}


def test_the_runs_judge_judges_the_metrics_without_one(servers):
    own, shared = servers
    metrics = [
        ContextPrecision(model=f"{own.base_url}#own-model"),
        ContextualRelevancyMetric(),  # no judge of its own: the run's
        ContextSimilarityEvaluator(),  # embeddings only
    ]
    run = evaluate(CASES, metrics, judge=f"{shared.base_url}#shared-model", progress=False)
    assert own.calls == len(CASES) and shared.calls == len(CASES)
    judges = {name: s.judge for name, s in run.summaries.items()}
    assert judges == {
        "context-precision": "openai-compat:own-model",
        "contextual-relevancy": "openai-compat:shared-model",
        "context-similarity": None,  # it asks no judge
    }
    assert run.summaries["contextual-relevancy"].mean == pytest.approx(0.5)
    assert "own-model" in run.judge and "shared-model" in run.judge


def test_an_offline_run_never_silently_drops_a_metrics_judge(servers):
    own, _ = servers
    run = evaluate(CASES, [ContextPrecision(model=f"{own.base_url}#own-model")], judge="offline")
    assert own.calls == len(CASES)
    assert run.summaries["context-precision"].judge == "openai-compat:own-model"


def test_an_explicitly_offline_metric_stays_offline_under_a_run_judge(servers):
    _, shared = servers
    run = evaluate(CASES, [ContextPrecision(model="offline")], judge=f"{shared.base_url}#m")
    assert shared.calls == 0
    assert run.summaries["context-precision"].judge == "offline"


def test_judges_a_facade_builds_use_the_cache(servers, tmp_path):
    own, _ = servers
    metric = ContextPrecision(model=f"{own.base_url}#own-model")
    evaluate(CASES, [metric], cache=tmp_path / "cache.sqlite3", progress=False)
    first = own.calls
    evaluate(CASES, [metric], cache=tmp_path / "cache.sqlite3", progress=False)
    assert first >= 1 and own.calls == first  # the second run is answered from the cache
    own.reset()
    for _ in range(3):  # the seed call surface goes through the same default cache
        metric.score(input="q", output="o", expected_output="e", context=["c"])
    assert own.calls == 1


def test_making_a_metric_or_a_run_changes_no_other_runs_bound(servers):
    own, _ = servers
    spec = f"{own.base_url}#limited"
    key = OpenAICompatBackend("limited", base_url=own.base_url).key
    shared = limiter_for(key)
    metric = ContextPrecision(model=spec)
    ContextualRelevancyMetric(model=spec)
    assert limiter_for(key) is shared and shared.peak == 0  # making metrics sent nothing
    evaluate(CASES, [metric], cache=False, progress=False, max_concurrency=2)
    bounded = limiter_for(key, 2)
    assert bounded is not shared and 1 <= bounded.peak <= 2 and shared.peak == 0
    evaluate(CASES, [metric], cache=False, progress=False)
    # the next run without a bound is on the backend's own limiter, untouched by the first:
    # the server reports no slots, so a ramp of its own sets it
    assert shared.peak >= 1 and shared.origin in (RAMPING, FOUND_BY_RAMP)
    assert bounded.max_limit == 2 and bounded.origin == "set to 2"


def test_max_concurrency_bounds_a_ready_llm_judge_without_changing_it(servers):
    from contextlens.judges import LLMJudge

    own, _ = servers
    judge = LLMJudge(OpenAICompatBackend("ready", base_url=own.base_url))
    mine = judge.limiter
    evaluate(CASES, ["context-precision"], judge=judge, cache=False, max_concurrency=2)
    assert judge.limiter is mine and mine.peak == 0  # the user's judge is not changed
    assert limiter_for(judge.connection_key(), 2).peak <= 2 and own.calls == len(CASES)


def test_a_failed_item_keeps_the_judges_last_reply_in_results_and_report(tmp_path):
    echo = "Free shipping on orders over $50. Free shipping on orders over $50."
    with FakeOpenAIServer(reply=lambda request: echo, slots=4) as server:
        run = evaluate(
            CASES[:1],
            [ContextPrecision(model=f"{server.base_url}#echo")],
            cache=False,
            progress=False,
            out=tmp_path,
            keep_results=True,
        )
    (item,) = run.results
    assert item.failed and "holds no JSON object" in item.error
    assert item.details.raw_reply == echo
    folder = Path(run.out_dir)
    (line,) = (folder / "results.jsonl").read_text().splitlines()
    assert json.loads(line)["details"]["raw_reply"] == echo
    report = write_report(run, tmp_path / "report.html").read_text()
    assert "the judge's last reply" in report and "Free shipping on orders over $50." in report
