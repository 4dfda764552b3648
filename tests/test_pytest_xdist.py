"""The pytest plugin under pytest-xdist: the controller merges every worker's items into the
session's table and its one report; the workers write nothing."""

from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra has it)")

pytest_plugins = ["pytester"]

# Eight tests, each its own case, each scored offline: with -n 2 both workers take some.
TESTS = textwrap.dedent(
    """
    import os

    import pytest

    from contextlens import Batch, Context, Dataset
    from contextlens.pytest_plugin import assert_context

    CONTEXT = "The shop opens at 9 am and closes at 5 pm."

    @pytest.mark.parametrize("n", range(8))
    def test_session(n):
        case = Dataset(
            session_id=f"s{n}",
            assistant_id="bot",
            context=CONTEXT,
            conversation=[Batch(qa_id="q1", query="When do you open?", assistant="At 9 am.")],
        )
        assert_context(case, [Context()], cache=False, thresholds={"context": 0.0})
        worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
        with open(f"ran-{worker}-{n}", "w"):  # which worker ran which test
            pass
    """
)


@pytest.fixture(autouse=True)
def _only_these_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load the plugin and xdist by ``-p`` only, whether or not their entry points are
    installed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("COLUMNS", "120")


@pytest.fixture(autouse=True)
def _not_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions these tests start are not workers of the session running them."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def session(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_cases=TESTS)
    return pytester.runpytest_subprocess(
        "-p", "contextlens.pytest_plugin", "-p", "no:cacheprovider", *args, timeout=300
    )


def rows_of(report: str) -> list[list[str]]:
    data = report.split('<script type="application/json" id="cl-rows">')[1].split("</script>")[0]
    rows: list[list[str]] = json.loads(data)["rows"]
    return rows


def test_two_workers_items_are_in_the_one_report_and_table(pytester: pytest.Pytester) -> None:
    result = session(pytester, "-p", "xdist", "-n", "2", "--contextlens-report=out/report.html")
    result.assert_outcomes(passed=8)
    workers = {p.name.split("-")[1] for p in pytester.path.glob("ran-*")}
    assert workers == {"gw0", "gw1"}  # the work was shared
    html = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert 'data-metric="context" data-field="n" data-value="8"' in html
    ids = sorted(r[0] for r in rows_of(html))
    assert ids == sorted(f"test_cases.py::test_session[{n}] [s{n}]" for n in range(8))
    out = result.stdout.str()
    section = out.split("= contextlens =")[1]
    assert "contextlens: 8 assert_context calls" in section
    [row] = [x for x in section.splitlines() if x.startswith("│ context")]
    assert row.split("│")[-4].strip() == "8"  # n: every worker's items
    assert "contextlens report: " in section and "no assert_context results" not in out
    assert [p.name for p in (pytester.path / "out").iterdir()] == ["report.html"]


def test_without_xdist_the_session_is_reported_as_before(pytester: pytest.Pytester) -> None:
    result = session(pytester, "--contextlens-report=out/report.html")
    result.assert_outcomes(passed=8)
    assert {p.name.split("-")[1] for p in pytester.path.glob("ran-*")} == {"none"}
    html = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert 'data-metric="context" data-field="n" data-value="8"' in html
    assert "contextlens: 8 assert_context calls" in result.stdout.str()


def test_a_worker_that_crashed_is_said_to_have_taken_its_items_with_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_crash=textwrap.dedent(
            """
            import os

            from contextlens import Batch, Context, Dataset
            from contextlens.pytest_plugin import assert_context

            def test_crash():
                case = Dataset(session_id="s", assistant_id="bot", context="Open at 9 am.",
                               conversation=[Batch(qa_id="q1", query="When?", assistant="9.")])
                assert_context(case, [Context()], cache=False)
                os._exit(3)  # the worker dies with what it scored
            """
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "contextlens.pytest_plugin", "-p", "no:cacheprovider", "-p", "xdist", "-n", "1",
        timeout=300,
    )  # fmt: skip
    result.stdout.fnmatch_lines(
        ["contextlens: worker(s) gw0 went down without handing over their assert_context *"]
    )
