"""gaussia's call surface: ``Context.run`` / ``Context.arun`` -> ``list[ContextMetric]``.

The scoring itself (the ContextAwareness core) is tested in tests/metrics/test_context.py.
"""

import logging
import math
from pathlib import Path

import pytest

from contextlens import (
    BayesianMode,
    Context,
    ContextInteraction,
    ContextMetric,
    Dataset,
    JsonlRetriever,
    Retriever,
    StatisticalMode,
    evaluate,
)
from contextlens.metrics.context import ContextAwareness
from contextlens.stats import FrequentistMode
from support.context import by_query, make_session, verdict

EXAMPLE = Path(__file__).parents[2] / "examples" / "context_techstore.py"


class ListRetriever(Retriever):
    def load_dataset(self):
        return self.kwargs["sessions"]


@pytest.fixture
def failing_delivery(rule_model):
    """A judge that scores hours 1.0 and monday 0.4, and replies to "delivery" (and to its
    re-ask) with no JSON."""
    return rule_model(by_query({"hours": verdict(1.0, "a"), "monday": verdict(0.4, "c")}))


def gaussia_loop() -> str:
    """The per-session loop of gaussia's TechStore example, as it is written there."""
    source = EXAMPLE.read_text(encoding="utf-8")
    loop = source[source.index("for metric in metrics:") :]
    assert "interaction.context_awareness >= 0.8" in loop
    assert "score={interaction.context_awareness:.2f}" in loop
    return loop


def test_a_failed_interaction_is_nan_with_its_error_and_left_out_of_the_mean(
    failing_delivery, capsys
):
    [metric] = Context.run(ListRetriever, model=failing_delivery, sessions=[make_session()])
    by_id = {i.qa_id: i for i in metric.interactions}
    assert list(by_id) == ["hours", "delivery", "monday"]
    assert all(isinstance(i, ContextInteraction) for i in metric.interactions)
    failed = by_id["delivery"]
    assert isinstance(failed.context_awareness, float) and math.isnan(failed.context_awareness)
    assert failed.failed is True and "no JSON object" in failed.error
    assert failed.reason is None
    assert [i.qa_id for i in metric.interactions if i.failed] == ["delivery"]
    assert (by_id["hours"].context_awareness, by_id["hours"].reason) == (1.0, "a")
    assert (by_id["monday"].context_awareness, by_id["monday"].reason) == (0.4, "c")
    assert by_id["hours"].error is None and by_id["hours"].failed is False
    assert metric.n_interactions == 3 and metric.n_failed == 1
    assert metric.context_awareness == pytest.approx((1.0 + 0.4) / 2)
    assert metric.judge.startswith("langchain:")
    assert metric.model_dump()["interactions"][1]["failed"] is True

    exec(gaussia_loop(), {"metrics": [metric]})
    out = capsys.readouterr().out
    status = dict(
        line.strip().split("] ", 1) for line in out.splitlines() if line.strip().startswith("[")
    )
    assert status["[hours"].startswith("✅ PASS") and status["[monday"].startswith("❌ FAIL")
    assert status["[delivery"] == "❌ FAIL  score=nan"
    assert "Context awareness: 0.70" in out


def test_all_failed_gives_nan_not_zero(rule_model):
    model = rule_model(lambda prompt: "nope")
    session = make_session()
    session.conversation = session.conversation[:1]
    [metric] = Context.run(ListRetriever, model=model, sessions=[session])
    assert math.isnan(metric.context_awareness) and metric.n_failed == 1
    assert metric.context_awareness_ci_low is None and metric.context_awareness_ci_high is None
    [only] = metric.interactions
    assert only.failed and math.isnan(only.context_awareness) and "no JSON object" in only.error


def test_weights_reach_the_interactions_and_the_mean(rule_model):
    model = rule_model(
        by_query({"hours": verdict(1.0), "delivery": verdict(1.0), "monday": verdict(0.0)})
    )
    session = make_session(weights=(0.1, 0.1, 0.8))
    [metric] = Context.run(ListRetriever, model=model, sessions=[session])
    assert metric.context_awareness == pytest.approx(0.2)
    assert [i.weight for i in metric.interactions] == [0.1, 0.1, 0.8]


def test_statistical_mode_gives_the_interval_and_the_default_none():
    mode = BayesianMode(mc_samples=2000, ci_level=0.9)
    runs = [
        Context.run(ListRetriever, sessions=[make_session()], statistical_mode=mode)[0]
        for _ in "ab"
    ]
    m = runs[0]
    assert m.context_awareness_ci_low <= m.context_awareness <= m.context_awareness_ci_high
    assert m.context_awareness_ci_low < m.context_awareness_ci_high
    assert runs[0] == runs[1]
    for frequentist in (
        Context.run(ListRetriever, sessions=[make_session()]),
        Context.run(ListRetriever, sessions=[make_session()], statistical_mode=FrequentistMode()),
    ):
        [f] = frequentist
        assert f.context_awareness_ci_low is None and f.context_awareness_ci_high is None
        assert f.context_awareness == pytest.approx(m.context_awareness)


def test_retriever_kwargs_reach_the_retriever(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        make_session("a").model_dump_json() + "\n" + make_session("b").model_dump_json()
    )
    metrics = Context.run(JsonlRetriever, path=path)
    assert [m.session_id for m in metrics] == ["a", "b"]
    assert all(isinstance(m, ContextMetric) for m in metrics)
    assert all(m.judge == "offline" and m.n_failed == 0 for m in metrics)
    assert all(m.assistant_id == "pizza-bot" and m.n_interactions == 3 for m in metrics)
    scores = {i.qa_id: i.context_awareness for i in metrics[0].interactions}
    assert scores["monday"] < 0.5 <= min(scores["hours"], scores["delivery"])
    assert all(i.reason and not i.failed for i in metrics[0].interactions)


def test_a_retriever_instance_is_used_as_is_and_takes_no_kwargs():
    retriever = ListRetriever(sessions=[make_session("inst")])
    [metric] = Context.run(retriever)
    assert metric.session_id == "inst"
    with pytest.raises(TypeError, match="unexpected arguments"):
        Context.run(retriever, sessions=[])
    assert Context.run(ListRetriever, sessions=[]) == []


def test_json_clauses_reach_the_judge(rule_model):
    def rule(prompt):
        return "<<J>>" + verdict(0.7) + "<</J>>"

    model = rule_model(rule)
    [metric] = Context.run(
        ListRetriever,
        model=model,
        sessions=[make_session()],
        bos_json_clause="<<J>>",
        eos_json_clause="<</J>>",
    )
    assert metric.n_failed == 0 and metric.context_awareness == pytest.approx(0.7)
    assert model.calls == 3


def test_verbose_writes_to_stderr_for_that_call_only(failing_delivery, capsys):
    logger = logging.getLogger("contextlens")
    level, handlers = logger.level, list(logger.handlers)

    Context.run(ListRetriever, model=failing_delivery, sessions=[make_session()], verbose=True)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith("contextlens Context: 1 sessions, judge langchain:")
    assert lines[1].startswith("session s1 (langchain:")
    assert "context awareness 0.70 over 3 interactions, 1 failed" in lines[1]
    assert "  hours: 1.00  a" in lines
    assert "  monday: 0.40  c" in lines
    [failure] = [line for line in lines if line.startswith("  delivery: ")]
    assert failure.startswith("  delivery: FAILED: ") and "no JSON object" in failure
    assert (logger.level, logger.handlers) == (level, handlers)

    Context.run(ListRetriever, model=failing_delivery, sessions=[make_session()])
    assert capsys.readouterr() == ("", "")
    assert (logger.level, logger.handlers) == (level, handlers)


async def test_sync_run_works_inside_a_running_loop_and_arun_awaits():
    [a] = Context.run(ListRetriever, sessions=[make_session()])
    [b] = await Context.arun(ListRetriever, sessions=[make_session()])
    assert a == b


def test_an_instance_is_a_metric_for_evaluate():
    mode = BayesianMode(mc_samples=2000)
    shell = Context(mode)
    assert isinstance(shell.metric, ContextAwareness) and shell.case_type is Dataset
    assert shell.metric.config.statistical_mode is mode
    run = evaluate([make_session()], [shell], progress=False, keep_results=True)
    [item] = run.results
    [metric] = Context.run(ListRetriever, sessions=[make_session()])
    assert item.score == pytest.approx(metric.context_awareness)
    assert item.details.ci_low <= item.score <= item.details.ci_high


# --- a StatisticalMode of one's own, as gaussia's docs write one -------------------------------


class MedianMode(StatisticalMode):
    """gaussia's documented custom mode: its five primitives, no ``estimate`` (the session's
    score is ``aggregate_metrics`` of its scores, as gaussia's Context reads a point-estimate
    mode): here the weighted median."""

    def rate_estimation(self, successes, trials):
        return successes / trials if trials else 0.0

    def aggregate_metrics(self, metrics, weights):
        ranked = sorted(metrics, key=lambda k: metrics[k])
        total, seen = sum(weights.values()), 0.0
        for key in ranked:
            seen += weights[key]
            if seen >= total / 2:
                return metrics[key]
        return 0.0

    def dispersion_metric(self, values, center="mean"):
        return 0.0

    def distribution_divergence(self, observed, reference, divergence_type="total_variation"):
        return 0.0

    def get_result_type(self) -> str:
        return "point_estimate"


def test_a_custom_point_estimate_mode_gives_the_session_its_score(rule_model):
    model = rule_model(
        by_query({"hours": verdict(1.0), "delivery": verdict(0.9), "monday": verdict(0.0)})
    )
    mode = MedianMode()
    [metric] = Context.run(
        ListRetriever, model=model, sessions=[make_session()], statistical_mode=mode
    )
    assert metric.context_awareness == 0.9  # the median, not the mean (0.63)
    assert metric.context_awareness_ci_low is None and metric.context_awareness_ci_high is None
    context = Context(ListRetriever, model=model, statistical_mode=mode, sessions=[])
    assert context.statistical_mode is mode
    [item] = evaluate([make_session()], [context], progress=False).results
    assert item.score == 0.9


def test_a_custom_distribution_mode_gets_a_credible_interval_from_its_settings():
    class Sampled(MedianMode):
        mc_samples, ci_level = 400, 0.8

        def get_result_type(self) -> str:
            return "distribution"

    [metric] = Context.run(ListRetriever, sessions=[make_session()], statistical_mode=Sampled())
    [mean] = Context.run(ListRetriever, sessions=[make_session()])
    assert metric.context_awareness == pytest.approx(mean.context_awareness)
    low, high = metric.context_awareness_ci_low, metric.context_awareness_ci_high
    assert low < metric.context_awareness < high
    [bayes] = Context.run(
        ListRetriever,
        sessions=[make_session()],
        statistical_mode=BayesianMode(mc_samples=400, ci_level=0.8),
    )
    assert (bayes.context_awareness_ci_low, bayes.context_awareness_ci_high) == (low, high)


def test_a_mode_as_the_docs_sketch_it_fails_naming_what_it_lacks():
    class Sketch(StatisticalMode):  # gaussia's docs: every body is "..."
        def rate_estimation(self, successes, trials): ...

        def aggregate_metrics(self, metrics, weights): ...

        def dispersion_metric(self, values, center="mean"): ...

        def distribution_divergence(
            self, observed, reference, divergence_type="total_variation"
        ): ...

        def get_result_type(self) -> str:
            return "point_estimate"

    with pytest.raises(TypeError, match=r"Sketch\.aggregate_metrics.*returned None, not a number"):
        Context(Sketch())


def test_a_mode_without_gaussias_or_contextlens_methods_is_named():
    class Bare(StatisticalMode):
        pass

    with pytest.raises(TypeError, match=r"Bare has neither estimate.*nor get_result_type"):
        Context(statistical_mode=Bare())

    class NoAggregate(StatisticalMode):
        def get_result_type(self) -> str:
            return "point_estimate"

    with pytest.raises(
        TypeError, match="NoAggregate is a point-estimate mode without aggregate_metrics"
    ):
        Context(statistical_mode=NoAggregate())

    class Odd(MedianMode):
        def get_result_type(self) -> str:
            return "interval"

    with pytest.raises(ValueError, match=r"Odd\.get_result_type\(\) returned 'interval'"):
        Context(statistical_mode=Odd())
