"""The pytest plugin: assert_context in a test session, and the session's HTML report."""

from __future__ import annotations

import json
import textwrap

import pytest

import contextlens.pytest_plugin  # noqa: F401  (imported here, before pytester's snapshot)
from contextlens import Batch, Context, ContextPrecision, Dataset
from contextlens.runner import evaluate
from contextlens.schemas import ModelTestCase

pytest_plugins = ["pytester"]

PLUGIN = ("-p", "contextlens.pytest_plugin")

CASES = textwrap.dedent(
    """
    from contextlens import Batch, Context, Dataset
    from contextlens import ContextPrecision
    from contextlens.pytest_plugin import assert_context
    from contextlens.schemas import ModelTestCase

    CONTEXT = "The shop opens at 9 am and closes at 5 pm. Returns are accepted within 30 days."

    def session(answer, sid="s1"):
        return Dataset(
            session_id=sid,
            assistant_id="bot",
            context=CONTEXT,
            conversation=[Batch(qa_id="q1", query="When do you open?", assistant=answer)],
        )

    class Thresholded(ContextPrecision):
        threshold = 0.99  # DeepEval style: the metric carries its threshold
    """
)


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """One offline evaluation first: every lazy import (numpy, onnxruntime, the embedder)
    happens here, not inside the in-process runs, whose imports pytester rolls back."""
    session = Dataset(
        session_id="warm",
        assistant_id="bot",
        context="Open at 9 am.",
        conversation=[Batch(qa_id="q1", query="When?", assistant="At 9 am.")],
    )
    case = ModelTestCase(input="When?", actual_output="9 am", expected_output="9 am")
    evaluate([session, case], [Context(), ContextPrecision()], cache=False, progress=False)


@pytest.fixture(autouse=True)
def _only_this_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load the plugin by ``-p`` only, whether or not its entry point is installed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_cases=CASES + textwrap.dedent(body))
    return pytester.runpytest_inprocess(*PLUGIN, "-p", "no:cacheprovider", *args)


def test_a_case_above_its_threshold_passes(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_good():
            items = assert_context(
                session("We open at 9 am."), [Context()], thresholds={"context": 0.5}, cache=False
            )
            assert items[0].metric == "context" and items[0].success is True
        """,
    )
    result.assert_outcomes(passed=1)


def test_a_case_below_its_threshold_fails_with_metric_score_threshold_and_reason(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_bad():
            assert_context(
                session("We are open 24/7 and ship to Mars for free."),
                [Context()],
                thresholds={"context": 0.7},
                cache=False,
            )
        """,
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "context: score 0." in out and "is below the threshold 0.700" in out
    assert "reason: lowest interaction q1" in out and "claim(s) supported" in out
    assert "test_cases.py::test_bad [s1]" in out  # the case is named by its test


def test_a_metric_threshold_attribute_and_a_failed_item_fail_the_test(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_threshold_attribute():
            case = ModelTestCase(input="When?", actual_output="Sometime.",
                                 expected_output="At 9 am.", retrieval_context=["Opens 9 am."])
            assert_context(case, [Thresholded()], cache=False)

        def test_failed_item():
            assert_context(ModelTestCase(input="q", actual_output="a"), [ContextPrecision()],
                           cache=False)

        def test_metric_of_another_case_type():
            assert_context(ModelTestCase(input="q", actual_output="a"), [Context()], cache=False)
        """,
    )
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "is below the threshold 0.990" in out
    assert "metric 'context-precision' requires one of 'expected_output'" in out
    assert "context: does not apply to a ModelTestCase (it takes a Dataset)" in out


def test_report_option_writes_the_session_report(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest

        @pytest.mark.parametrize("answer", ["We open at 9 am.", "<script>alert(1)</script>"])
        def test_sessions(answer):  # every score passes a pass mark of 0
            assert_context(session(answer, sid=answer), [Context()], cache=False,
                           thresholds={"context": 0.0})

        def test_rag():
            case = ModelTestCase(input="When?", actual_output="We open at 9 am.",
                                 expected_output="At 9 am.", retrieval_context=["Opens 9 am."],
                                 name="hours")
            assert_context(case, [ContextPrecision()], thresholds={"context_precision_metric": 1.0},
                           cache=False)
        """,
        "--contextlens-report=out/report.html",
    )
    result.assert_outcomes(passed=2, failed=1)
    report = pytester.path / "out" / "report.html"
    assert report.exists()
    html = report.read_text(encoding="utf-8")
    assert 'data-metric="context" data-field="n" data-value="2"' in html
    assert 'data-metric="context-precision" data-field="n" data-value="1"' in html
    # the session's summaries are the run's: pass rates too (both sessions pass at 0)
    assert 'data-metric="context" data-field="pass_rate" data-value="1' in html
    assert 'data-metric="context-precision" data-field="pass_rate" data-value="0' in html
    rows = json.loads(
        html.split('<script type="application/json" id="cl-rows">')[1].split("</script>")[0]
    )
    [hours] = [r for r in rows["rows"] if "hours" in r[0]]
    assert "below" in hours[2]  # the failing case is marked below its pass mark
    assert "<script>alert(1)</script>" not in html  # the hostile id is data, escaped
    assert any("<script>alert(1)</script>" in r[0] for r in rows["rows"])
    result.stdout.fnmatch_lines(["contextlens report: *report.html"])


def test_no_report_without_results(pytester: pytest.Pytester) -> None:
    result = run(pytester, "def test_nothing():\n    pass\n", "--contextlens-report=r.html")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "r.html").exists()
    result.stdout.fnmatch_lines(["contextlens report: no assert_context results*"])
