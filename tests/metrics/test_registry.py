"""The metric registry: a metric is one module; registering it is all it takes to appear in
``contextlens run -m``, ``contextlens schema``, ``calibrate --metric``, ``evaluate`` and the
pytest plugin."""

import json
import subprocess
import sys

import pytest

import contextlens
from contextlens import MetricResult, ModelTestCase, evaluate, metric
from contextlens.metrics import registry
from contextlens.metrics.base import Services
from contextlens.pytest_plugin import assert_context


@pytest.fixture
def toy():
    """A fifth metric, registered for the test: the share of the answer's words found in
    the retrieved context."""

    @metric("toy-overlap", reads=("actual_output", "retrieval_context"))
    class ToyOverlap:
        """Share of the answer's words found in the retrieved context."""

        case_type = ModelTestCase

        def __init__(self, name: str = "toy_overlap") -> None:
            self.name = name

        async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
            words = (case.actual_output or "").lower().split()
            context = " ".join(case.retrieval_context or []).lower().split()
            share = sum(w in context for w in words) / len(words) if words else 0.0
            return MetricResult(metric=self.name, score=share, reason=f"{share:.0%} found")

    yield ToyOverlap
    registry.unregister("toy-overlap")


CASES = [
    {
        "id": "a",
        "input": "q",
        "actual_output": "opens at nine",
        "retrieval_context": ["opens at nine"],
    },
    {
        "id": "b",
        "input": "q",
        "actual_output": "closed today",
        "retrieval_context": ["opens at nine"],
    },
]


def test_the_built_in_metrics_are_found_without_being_named_anywhere():
    code = "from contextlens.metrics import registry; print(' '.join(registry.names()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "citations",
        "context",
        "context-precision",
        "context-precision-ranked",
        "context-recall",
        "context-similarity",
        "contextual-relevancy",
        "faithfulness",
        "rag-diagnostics",
        "retrieval",
        "sufficient-context",
        "turn-context-precision-ranked",
        "turn-context-recall",
        "turn-contextual-relevancy",
        "turn-faithfulness",
    ]


def test_a_registered_metric_is_found_everywhere(toy, run_cli, tmp_path):
    assert "toy-overlap" in contextlens.list_metrics()
    info = contextlens.get_metric("toy-overlap")
    assert info.case_type is ModelTestCase and info.reads == ("actual_output", "retrieval_context")

    code, text = run_cli("schema")
    assert code == 0 and "toy-overlap" in text and "Share of the answer's words" in text

    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    out = tmp_path / "out"
    code, text = run_cli("run", cases, "-m", "toy-overlap", "--out", out, "-q", "--no-store")
    assert code == 0, text
    summary = json.loads((out / "latest" / "summary.json").read_text())
    assert summary["summaries"]["toy-overlap"]["mean"] == pytest.approx(0.5)

    labelled = tmp_path / "labelled.jsonl"
    rows = [
        {
            "id": c["id"],
            "question": "q",
            "answer": c["actual_output"],
            "contexts": c["retrieval_context"],
            "label": label,
        }
        for c, label in zip(CASES, (1, 0), strict=True)
    ]
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, text = run_cli("calibrate", labelled, "--metric", "toy-overlap", "--out", tmp_path)
    assert code == 0, text
    assert json.loads((tmp_path / "latest" / "calibration.json").read_text())["auroc"] == 1.0

    run = evaluate(
        [ModelTestCase(**c) for c in CASES],  # "id" is a name of "name"
        ["toy-overlap"],
        progress=False,
    )
    assert [r.score for r in run.results] == [1.0, 0.0]
    [item] = assert_context(
        ModelTestCase(input="q", actual_output="opens", retrieval_context=["opens"]),
        ["toy-overlap"],
    )
    assert item.score == 1.0


def test_unknown_names_and_taken_names_are_refused(toy, run_cli, tmp_path):
    with pytest.raises(registry.UnknownMetricError, match="toy-overlap"):
        registry.create("nonsense")  # the message lists the known names

    with pytest.raises(ValueError, match="already registered"):

        @metric("toy-overlap")
        class Another:
            case_type = ModelTestCase

    with pytest.raises(TypeError, match="case_type"):
        metric("no-case-type")(lambda: None)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(CASES[0]) + "\n")
    code, text = run_cli("run", cases, "-m", "nonsense", "--out", tmp_path / "o")
    assert code == 2 and "toy-overlap" in text and "Traceback" not in text


def test_a_misspelt_field_fails_at_registration_naming_it_and_the_field_it_means():
    from contextlens import Dataset

    with pytest.raises(ValueError, match=r"requires 'expected_ouput'.*'expected_output'"):

        @metric("typo-requires", requires=("expected_ouput",), case_type=ModelTestCase)
        class Typo:
            """Never registered."""

    with pytest.raises(ValueError, match=r"reads 'asistant'.*'assistant'"):

        @metric("typo-reads", reads=("asistant",), case_type=Dataset)
        class SessionTypo:
            """Never registered."""

    assert "typo-requires" not in registry.registered()
    assert "typo-reads" not in registry.registered()
    # an alternative among requirements is checked as well
    with pytest.raises(ValueError, match="'retrival_context'"):
        metric("typo-either", requires=(("retrival_context", "context"),), case_type=ModelTestCase)(
            type("Either", (), {})
        )
