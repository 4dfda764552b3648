"""``compare A B --fail-on-regression METRIC[=TOLERANCE]``: exit 1 when B is credibly worse
than A on the cases both scored, 0 on noise, the rule and each verdict said in the terminal
and in the pull request comment (``--markdown``). The runs are real offline runs."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from contextlens.compare import compare
from contextlens.runner.gates import RegressionGate, parse_regression_gates
from contextlens.stats import BayesianMode

CONTEXT = [
    "The shop opens at 9 am and closes at 5 pm on weekdays.",
    "Returns are accepted within 30 days with a receipt.",
    "Shipping to Canada takes five business days.",
    "Parking is free for customers behind the building.",
]
SUPPORTED = [
    "The shop opens at 9 am on weekdays.",
    "Returns are accepted within 30 days.",
    "Shipping to Canada takes five business days.",
    "Parking behind the building is free.",
]
UNSUPPORTED = [
    "The shop is open all night on Sundays.",
    "Returns are never accepted.",
    "Shipping to Canada is instant and costs 200 dollars.",
    "Parking costs 40 dollars an hour.",
]
N = 30


def answer(i: int, supported: int) -> str:
    """Case ``i``'s answer: four claims, ``supported`` of them in its context."""
    rng = random.Random(i)
    order = list(range(4))
    rng.shuffle(order)
    claims = [SUPPORTED[j] for j in order[:supported]] + [UNSUPPORTED[j] for j in order[supported:]]
    rng.shuffle(claims)
    return " ".join(claims)


def run_of(run_cli, tmp_path, name: str, supported: list[int]) -> str:
    """A real offline faithfulness run over one case per entry of ``supported``; its folder."""
    data = tmp_path / f"{name}.jsonl"
    rows = [
        {
            "id": f"c{i:02d}",
            "input": "Tell me about the shop.",
            "actual_output": answer(i, k),
            "retrieval_context": CONTEXT,
        }
        for i, k in enumerate(supported)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / name
    code, text = run_cli("run", data, "-m", "faithfulness", "--out", out, "-q", "--no-store")
    assert code == 0, text
    return str(out / "latest")


@pytest.fixture
def runs(run_cli, tmp_path):
    """Run folders: the baseline A (3 of 4 claims supported), B with its faithfulness lowered
    on most cases (1 of 4 on 24 of 30), and B as A perturbed at random (6 cases a claim
    better, 6 a claim worse)."""
    rng = random.Random(7)
    noisy = [3] * N
    for k, i in enumerate(rng.sample(range(N), 12)):
        noisy[i] = 4 if k % 2 else 2
    return {
        "a": run_of(run_cli, tmp_path, "a", [3] * N),
        "worse": run_of(run_cli, tmp_path, "worse", [1 if i % 5 else 3 for i in range(N)]),
        "noisy": run_of(run_cli, tmp_path, "noisy", noisy),
    }


def cells(markdown: str, metric: str) -> list[str]:
    """The cells of the regression gate row of ``metric``."""
    gates = markdown.split("**Regression gates")[1].split("changes:")[0]
    [row] = [x for x in gates.splitlines() if x.startswith(f"| {metric} |")]
    return [c.strip() for c in row.strip("|").split("|")]


def test_a_planted_regression_exits_1_and_says_so_with_the_rule(run_cli, tmp_path, runs):
    comment = tmp_path / "pr.md"
    args = ["compare", runs["a"], runs["worse"], "--out", tmp_path / "cmp"]
    code, text = run_cli(*args, "--fail-on-regression", "faithfulness", "--markdown", comment)
    assert code == 1, text
    flat = " ".join(text.split())
    assert "upper end of the 95% credible interval of the paired mean difference B - A" in flat
    m = compare(runs["a"], runs["worse"]).metric("faithfulness")
    assert m.n_paired == N and m.ci_high is not None and m.ci_high < 0
    assert re.search(r"regression gate faithfulness: B - A -0\.\d{3}, 95% interval", flat), flat
    assert f"over {N} pairs; upper end {m.ci_high:+.3f} < 0 (tolerance 0): regressed" in flat
    written = comment.read_text()
    assert "**Regression gates: 1 of 1 missed**, B fails." in written
    row = cells(written, "faithfulness")  # the PR comment: means, difference, interval, verdict
    assert row[1:6] == ["0", str(N), f"{m.mean_a:.3f}", f"{m.mean_b:.3f}", f"{m.mean_diff:+.3f}"]
    assert row[6] == f"\\[{m.ci_low:+.3f}, {m.ci_high:+.3f}\\]"
    assert row[7] == f"regressed: upper end {m.ci_high:+.3f} \\< 0"
    # a tolerance wider than the drop lets it through; the verdict says against what
    code, text = run_cli(*args, "--fail-on-regression", "faithfulness=0.5")
    assert code == 0, text
    assert f"upper end {m.ci_high:+.3f} >= -0.5 (tolerance 0.5): no credible regression" in (
        " ".join(text.split())
    )


def test_noise_exits_0(run_cli, tmp_path, runs):
    comment = tmp_path / "pr.md"
    code, text = run_cli(
        "compare",
        runs["a"],
        runs["noisy"],
        "--out",
        tmp_path / "cmp",
        "--fail-on-regression",
        "faithfulness",
        "--markdown",
        comment,
    )
    assert code == 0, text
    m = compare(runs["a"], runs["noisy"]).metric("faithfulness")
    assert m.ci_low is not None and m.ci_high is not None and m.ci_low < 0 < m.ci_high
    assert sum(p.diff < 0 for p in m.pairs) == sum(p.diff > 0 for p in m.pairs) == 6
    assert re.search(
        r"regression gate faithfulness: .* no credible regression", " ".join(text.split())
    )
    assert "**Regression gates: the 1 met**." in comment.read_text()
    assert cells(comment.read_text(), "faithfulness")[7].startswith("met: upper end +0.")


def test_a_metric_neither_run_measures_or_a_bad_tolerance_is_a_usage_error(run_cli, tmp_path, runs):
    base = ["compare", runs["a"], runs["noisy"], "--out", tmp_path / "cmp"]
    code, text = run_cli(*base, "--fail-on-regression", "context-precision")
    assert code == 2 and "does not measure" in text
    code, text = run_cli(*base, "--fail-on-regression", "faithfulness=2")
    assert code == 2 and "expected a value in [0, 1]" in text
    assert not (tmp_path / "cmp").exists()  # refused before the page is written


def test_the_gate_fails_when_the_interval_lies_below_minus_the_tolerance():
    rng = np.random.default_rng(5)
    a = rng.uniform(0.5, 0.9, 40)
    mode = BayesianMode()
    for shift, regressed in ((-0.1, True), (0.0, False), (0.05, False)):
        b = np.clip(a + shift + rng.normal(0, 0.02, 40), 0, 1)
        outcome = RegressionGate("m", 0.0).check(a, b, mode)
        assert outcome.missed == regressed and outcome.pairs == 40
        assert outcome.diff == pytest.approx(float(np.mean(b - a)))
        assert outcome.ci_low is not None and outcome.ci_high is not None
        assert outcome.ci_low <= outcome.diff <= outcome.ci_high
        assert (outcome.ci_high < 0) == regressed
    drop = a - 0.03
    assert RegressionGate("m", 0.0).check(a, drop, mode).missed
    assert not RegressionGate("m", 0.05).check(a, drop, mode).missed  # within the tolerance
    assert RegressionGate("m", 0.0).check(a[:1], drop[:1], mode).missed  # cannot be told
    [gate] = parse_regression_gates(["faithfulness=0.02"], ["faithfulness"])
    assert (gate.metric, gate.tolerance) == ("faithfulness", 0.02)
    assert parse_regression_gates(["faithfulness"], ["faithfulness"])[0].tolerance == 0.0
