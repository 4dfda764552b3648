"""The pytest plugin: assert_context in a test session, and the session's HTML report."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

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
    """The plugin's own path once first: every lazy import (the plugin imports the engine
    when first used; numpy, onnxruntime, the embedder, every registered metric, the session
    table) happens here, not inside the in-process runs, whose imports pytester rolls back."""
    from contextlens.metrics.registry import registered
    from contextlens.pytest_plugin import (
        _Collector,
        _judged,
        _rendered,
        collected_run,
        session_table,
    )

    registered()
    session = Dataset(
        session_id="warm",
        assistant_id="bot",
        context="Open at 9 am.",
        conversation=[Batch(qa_id="q1", query="When?", assistant="At 9 am.")],
    )
    case = ModelTestCase(input="When?", actual_output="9 am", expected_output="9 am")
    run = evaluate([session, case], [Context(), ContextPrecision()], cache=False, progress=False)
    items, _, marks = _judged(run, [ContextPrecision()], {"context-precision": 0.0}, case)
    collector = _Collector()  # not this session's: its table stays empty
    collector.add(run, items, marks)
    _rendered(session_table(collected_run(collector), 1, 0.1), 80, color=True)


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


def test_a_parametrized_case_is_named_once_and_fails_with_the_tests_own_line(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        import pytest

        @pytest.mark.parametrize("sid", ["de-urlaub", "fr-horaires"])
        def test_x(sid):
            answer = "We are open 24/7 and ship to Mars for free."
            assert_context(session(answer, sid=sid), [Context()], thresholds={"context": 0.7},
                           cache=False)

        @pytest.mark.parametrize("n", [1])
        def test_other_id(n):
            assert_context(session("Mars.", sid="s-9"), [Context()],
                           thresholds={"context": 0.7}, cache=False)
        """,
    )
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "not met for test_cases.py::test_x[de-urlaub]:" in out
    assert "not met for test_cases.py::test_x[fr-horaires]:" in out
    assert "[de-urlaub] [de-urlaub]" not in out and "[fr-horaires] [fr-horaires]" not in out
    assert "not met for test_cases.py::test_other_id[1] [s-9]:" in out  # another name: kept
    failures = out.split("= FAILURES =")[1].split("= contextlens =")[0]
    for frame in ("asyncio", "sync.py", "pytest_plugin.py", "runners.py", "base_events.py"):
        assert frame not in failures  # the test's line and the message, nothing between
    located = re.findall(r"^\S+\.py:\d+: .*$", failures, re.MULTILINE)
    assert len(located) == 3 and all(re.match(r"test_cases\.py:\d+: Ass", x) for x in located)
    assert failures.count(">       assert_context(") == 3  # the test's own line, only


def test_the_session_ends_with_a_table_of_its_metrics(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # the terminal's width, as pytest reads it
    result = run(
        pytester,
        """
        import pytest

        @pytest.mark.parametrize("answer", ["We open at 9 am.", "We never open.", "At 9 am."])
        def test_sessions(answer):
            assert_context(session(answer, sid=answer), [Context()], cache=False,
                           thresholds={"context": 0.0})

        def test_rag():
            case = ModelTestCase(input="When?", actual_output="We open at 9 am.",
                                 expected_output="At 9 am.", retrieval_context=["Opens 9 am."])
            assert_context(case, [ContextPrecision()], cache=False)
        """,
    )
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    section = out.split("= contextlens =")[1]
    assert "contextlens: 4 assert_context calls" in section
    header = next(x for x in section.splitlines() if x.startswith("┃ metric"))
    assert [c.strip() for c in header.strip().strip("┃").split("┃")][:3] == [
        "metric",
        "mean",
        "interval",
    ]
    rows = {x.split("│")[1].strip(): x for x in section.splitlines() if x.startswith("│ ")}
    assert set(rows) == {"context", "context-precision"}
    assert rows["context"].split("│")[-4].strip() == "3"  # n: the three sessions
    assert "judge offline" in section and "4 assert_context calls, " in section
    assert "@0" in rows["context"] and "@" not in rows["context-precision"]  # its threshold
    assert "contextlens report" not in out  # no --contextlens-report, no page


def test_a_session_that_never_asserts_prints_no_table(
    pytester: pytest.Pytester,
) -> None:
    result = run(pytester, "def test_nothing():\n    pass\n")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "= contextlens =" not in out and "assert_context call" not in out


def test_the_session_report_names_no_file_the_session_did_not_write(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_one():
            assert_context(session("We open at 9 am."), [Context()], cache=False)
        """,
        "--contextlens-report=out/report.html",
    )
    result.assert_outcomes(passed=1)
    html = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert "results.jsonl" not in html
    assert not (pytester.path / "out" / "results.jsonl").exists()
