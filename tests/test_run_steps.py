"""The steps of ``contextlens run``: its options gathered, the gate's exit status."""

import inspect
from dataclasses import fields

import numpy as np
import pytest

from contextlens.cli.run import run
from contextlens.cli.run.args import RunArgs
from contextlens.cli.run.gate import STOPPED, THRESHOLD_MISSED, TOO_MANY_FAILURES, gate
from contextlens.runner import EvalRun, ItemResult, MetricSummary, parse_gates
from contextlens.runner.gates import ordered


def finished(mean, *, failed=0, stopped=None):
    """A run of one metric ``m`` over four cases, ``failed`` of them failed."""
    results = [
        ItemResult(case_id=f"c{i}", metric="m", score=None, error="JudgeError: bad reply")
        for i in range(failed)
    ]
    results += [ItemResult(case_id=f"c{i}", metric="m", score=mean) for i in range(failed, 4)]
    summary = MetricSummary(metric="m", n=4, n_scored=4 - failed, n_failed=failed, mean=mean)
    return EvalRun(
        run_id="r",
        started_at="2024-05-01T10:00:00+00:00",
        duration_s=0.0,
        judge="offline",
        embedder="minilm",
        repeats=1,
        summaries={"m": summary},
        accounting={},
        results=results,
        stopped=stopped,
    )


def texts(verdict):
    return [str(said) for said in verdict.lines]


def test_the_options_object_has_a_field_for_each_option_of_the_command():
    assert [f.name for f in fields(RunArgs)] == list(inspect.signature(run).parameters)


def test_a_run_that_reaches_its_thresholds_exits_0():
    verdict = gate(finished(0.8), parse_gates(["m=0.7"], ["m"]), "0")
    assert (verdict.status, verdict.lines) == (0, [])


def test_a_missed_fail_under_exits_1_saying_which():
    verdict = gate(finished(0.4), parse_gates(["m=0.7"], ["m"]), "0")
    assert verdict.status == THRESHOLD_MISSED == 1
    assert texts(verdict) == ["threshold missed m: mean 0.400 < 0.7"]


def test_too_many_failures_exit_3_over_a_missed_threshold_with_the_first_failures():
    verdict = gate(finished(0.4, failed=2), parse_gates(["m=0.7"], ["m"]), "1")
    assert verdict.status == TOO_MANY_FAILURES == 3
    assert texts(verdict) == [
        "threshold missed m: mean 0.400 < 0.7",
        "too many failures m: 2 of 4 items failed (allowed 1)",
        "  failed c0 m: JudgeError: bad reply",
        "  failed c1 m: JudgeError: bad reply",
    ]
    assert gate(finished(0.8, failed=1), [], "25%").status == 0  # 1 of 4 is 25%: allowed


def test_a_run_its_cost_cap_stopped_exits_4_and_its_gates_are_not_judged():
    run = finished(0.4, failed=4, stopped="the cost cap of $1 was reached")
    verdict = gate(run, parse_gates(["m=0.7"], ["m"]), "0")
    assert verdict.status == STOPPED == 4
    assert texts(verdict)[0].startswith("stopped: the cost cap of $1 was reached")
    assert not any("threshold" in said or "failures" in said for said in texts(verdict))


def test_a_mean_just_under_its_mark_prints_under_it():
    verdict = gate(finished(0.19975), parse_gates(["m=0.2"], ["m"]), "0")
    assert texts(verdict) == ["threshold missed m: mean 0.1998 < 0.2"]
    met = gate(finished(0.2), parse_gates(["m=0.2"], ["m"]), "0")
    assert met.status == 0 and met.outcomes[0].said == "m: mean 0.200 >= 0.2"


@pytest.mark.parametrize(
    ("run", "fail_under", "max_failures"),
    [
        (finished(0.8), ["m=0.7"], "0"),
        (finished(0.4), ["m=0.7"], "0"),
        (finished(0.8, failed=1), [], "0"),
        (finished(0.8, failed=1), ["m=0.7"], "25%"),
        (finished(0.4, failed=2), ["m=0.7"], "1"),
        (finished(0.8, stopped="the cost cap of $1 was reached"), ["m=0.7"], "0"),
    ],
)
def test_the_gates_outcomes_are_missed_exactly_when_the_run_exits_non_zero(
    run, fail_under, max_failures
):
    verdict = gate(run, parse_gates(fail_under, ["m"]), max_failures)
    assert bool(verdict.status) == any(o.missed for o in verdict.outcomes)
    names = [o.name for o in verdict.outcomes]
    assert names[: len(fail_under)] == ["fail-under m"] * len(fail_under)
    assert "max-failures m" in names
    assert ("cost cap" in names) == (run.stopped is not None)


def test_printed_numbers_order_as_the_decision_does():
    rng = np.random.default_rng(3)
    digits = rng.integers(1, 5, 400)
    marks = [round(float(x), int(d)) for x, d in zip(rng.uniform(0, 1, 400), digits, strict=True)]
    values = marks + rng.choice([-1, 1], 400) * 10.0 ** -rng.integers(3, 9, 400).astype(float)
    for value, mark in zip(values, marks, strict=True):
        below = bool(value < mark)
        shown, bar = ordered(float(value), float(mark), below=below)
        assert (float(shown) < float(bar)) == below and float(bar) == mark
        assert len(shown.split(".")[1]) >= 3
        assert abs(float(shown) - value) <= 5e-4
    assert ordered(0.19975, 0.2, below=True) == ("0.1998", "0.2")
    assert ordered(0.8, 0.7, below=False) == ("0.800", "0.7")
    assert ordered(-4e-7, 0.0, below=True, signed=True) == ("-0.0000004", "0")
