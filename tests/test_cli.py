"""The command line: formats, exit statuses, store and comparison."""

import json
import re

import pandas as pd
import pytest

from contextlens.store import RunStore
from contextlens.testing import FakeOpenAIServer

CASES = [
    {
        "id": f"c{i}",
        "input": "What are the opening hours?",
        "actual_output": "We open at 9am.",
        "expected_output": "9am to 5pm.",
        "retrieval_context": ["The shop opens at 9am and closes at 5pm.", "Parking is free."],
    }
    for i in range(3)
]


@pytest.fixture
def cases_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in CASES) + "\n")
    return path


def test_run_writes_results_summary_and_report(run_cli, tmp_path, cases_file):
    out = tmp_path / "out"
    code, text = run_cli(
        "run",
        cases_file,
        "-m",
        "context-precision",
        "-m",
        "contextual-relevancy",
        "--out",
        out,
        "-q",
    )
    assert code == 0, text
    assert "context-precision" in text and "interval" in text
    (info,) = RunStore().list_runs()
    folder = out / info.run_id
    assert sorted(p.name for p in out.iterdir()) == sorted([info.run_id, "latest"])
    assert len((folder / "results.jsonl").read_text().splitlines()) == 6
    summary = json.loads((folder / "summary.json").read_text())
    assert set(summary["summaries"]) == {"context-precision", "contextual-relevancy"}
    assert (folder / "report.html").stat().st_size > 1000
    assert (out / "latest" / "report.html").read_bytes() == (folder / "report.html").read_bytes()
    assert f"run folder: {folder}" in text  # the run table says where its folder is
    assert f'data-run-field="out_dir">{folder}<' in (folder / "report.html").read_text()
    assert f"report:  {folder / 'report.html'}" in text
    assert f"<code>{folder / 'results.jsonl'}</code>" in (folder / "report.html").read_text()
    assert (info.status, info.out_dir, info.error) == ("completed", str(folder), None)
    assert info.command is not None and f"--out {out}" in info.command
    assert info.pid is not None and info.host


def test_sessions_from_csv_and_cases_from_parquet(run_cli, tmp_path):
    sessions = tmp_path / "s.csv"
    sessions.write_text(
        "session_id,assistant_id,context,qa_id,query,assistant,ground_truth_assistant\n"
        "s1,bot,Open 9am-5pm.,q1,When?,We open at 9am.,\n"
        "s1,bot,Open 9am-5pm.,q2,Sunday?,We are open 24/7.,\n"
    )
    code, text = run_cli("run", sessions, "--out", tmp_path / "a", "-q")
    assert code == 0, text
    parquet = tmp_path / "c.parquet"
    pd.DataFrame(CASES).to_parquet(parquet)
    code, text = run_cli(
        "run",
        parquet,
        "-m",
        "context-similarity",
        "--out",
        tmp_path / "b",
        "-q",
    )
    assert code == 0, text
    assert "context-similarity" in text


def test_fail_under_exit_status(run_cli, tmp_path, cases_file):
    args = ("run", cases_file, "-m", "context-similarity", "--out", tmp_path / "o", "-q")
    code, text = run_cli(*args, "--fail-under", "context-similarity=0.99")
    assert code == 1 and "threshold missed" in text
    code, _ = run_cli(*args, "--fail-under", "context-similarity=0.1")
    assert code == 0
    code, text = run_cli(
        *args,
        "--fail-under",
        "context-similarity=0.99",
        "--fail-mode",
        "interval",
    )
    assert code == 1 and "upper bound" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "missing.jsonl"), "no such file"),
        (("run", "{cases}", "-m", "nonsense"), "unknown metric"),
        (("run", "{cases}", "-m", "context"), "takes sessions"),
        (("run", "{cases}", "-m", "context-similarity", "--fail-under", "x"), "METRIC=VALUE"),
        (("run", "{bad}", "-m", "context-similarity"), "bad.jsonl:2: field 'input'"),
        (("run", "{cases}", "--judge", "nosuchmodule:thing"), "cannot load"),
        (("nonsense-command",), "No such command"),
    ],
)
def test_user_mistakes_exit_2_without_a_traceback(
    run_cli, monkeypatch, tmp_path, cases_file, args, message
):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(CASES[0]) + "\n" + json.dumps({"actual_output": "x"}) + "\n")
    args = [a.format(cases=cases_file, bad=bad) for a in args]
    monkeypatch.chdir(tmp_path)
    code, text = run_cli(*args, "--out", tmp_path / "o") if args[0] == "run" else run_cli(*args)
    assert code == 2, text
    assert message in text and "Traceback" not in text


def test_schema_lists_the_columns(run_cli):
    code, text = run_cli("schema")
    assert code == 0 and "retrieval_context" in text and "ground_truth_assistant" in text


def test_runs_and_compare(run_cli, tmp_path, cases_file, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        code, _ = run_cli(
            "run",
            cases_file,
            "-m",
            "context-similarity",
            "--out",
            tmp_path / name,
            "-q",
            "--name",
            "runs-and-compare",
            "--threshold",  # a similarity has no pass mark of its own: set one to compare
            "context-similarity=0.3",
        )
        assert code == 0
    first, second = RunStore().latest(2, name="runs-and-compare")
    code, text = run_cli("runs", "--name", "runs-and-compare")
    assert code == 0 and first.run_id in text and second.run_id in text
    rows = {r.split()[1]: r for r in text.splitlines() if first.run_id in r or second.run_id in r}
    assert "┃ status" in text and all("completed" in row for row in rows.values())
    assert all("runs-and-compare" in row for row in rows.values())  # each run's name
    assert "b/<run>" in rows[second.run_id] and "a/<run>" in rows[first.run_id]  # its folder
    code, text = run_cli("compare", first.run_id[:6], second.run_id, "--out", tmp_path / "cmp")
    assert code == 0, text
    page = tmp_path / "cmp" / f"compare-{first.run_id}-{second.run_id}.html"
    assert "identical" in text and page.exists()
    rate = f"{first.summaries['context-similarity'].pass_rate:.0%}"
    assert "pass A -> B" in text and f"{rate} -> {rate}" in text
    assert f'data-field="pass_rates">{rate} → {rate}<' in page.read_text()
    code, text = run_cli("compare", "zzzz", second.run_id)
    assert code == 2 and "zzzz" in text


def test_demo(run_cli, tmp_path):
    code, text = run_cli("demo", "--out", tmp_path / "demo")
    assert code == 0, text
    assert "context-eval-001" in text and (tmp_path / "demo" / "latest" / "report.html").exists()
    (folder,) = [p for p in (tmp_path / "demo").iterdir() if p.name != "latest"]
    assert f"report:  {folder / 'report.html'}" in text
    code, text = run_cli("demo", "--out", tmp_path / "demo")
    assert code == 0, text
    assert len(list((tmp_path / "demo").iterdir())) == 3  # two runs and latest


def test_a_run_in_a_log_prints_progress_lines(run_cli, tmp_path, cases_file):
    code, text = run_cli("run", cases_file, "-m", "context-similarity", "--out", tmp_path / "o")
    assert code == 0, text
    assert re.search(r"run: 3/3 items \(100%\), [0-9.]+ (items/s|s per item)", text)
    code, text = run_cli(
        "run", cases_file, "-m", "context-similarity", "--out", tmp_path / "q", "-q"
    )
    assert code == 0 and "elapsed" not in text


def test_judge_settings_reach_the_requests_and_progress_shows_seconds_per_call(
    run_cli, tmp_path, cases_file
):
    with FakeOpenAIServer(latency=0.05, formats=("text", "json_object")) as server:
        code, text = run_cli(
            "run",
            cases_file,
            "-m",
            "context-precision",
            "--judge",
            f"{server.base_url}#local-model?concurrency=2",
            "--judge-timeout",
            "30",
            "--max-tokens",
            "99",
            "--out",
            tmp_path / "o",
            "--cache",
            "off",
            "--no-store",
        )
        assert code == 0, text
        bodies, statuses = server.requests, server.status_counts
    assert {b["max_tokens"] for b in bodies} == {99}
    # json_schema refused (HTTP 500) for the calls already sent (2 at most in flight), then
    # json_object for every call
    kinds = [b["response_format"]["type"] for b in bodies]
    assert 1 <= kinds.count("json_schema") == statuses.get(500) <= 2
    assert kinds.count("json_object") == statuses[200] == len(CASES)
    assert re.search(r"\d+ judge calls, [0-9.]+ s per call", text)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("http://127.0.0.1:9/v1#m?timeout=soon", "timeout='soon'"),
        ("http://127.0.0.1:9/v1#m?temprature=0", "unknown setting 'temprature'"),
        ("http://127.0.0.1:9/v1#m?structured=grammar", "expected one of auto, json_schema"),
        ("llama:/no/such/model.gguf", "no GGUF file"),
    ],
)
def test_a_bad_judge_setting_is_a_usage_error_before_any_work(run_cli, cases_file, spec, problem):
    code, text = run_cli("run", cases_file, "-m", "context-precision", "--judge", spec)
    assert code == 2 and problem in text, text


def test_an_offline_run_says_its_scores_rank_and_calibrate_sets_the_scale(
    run_cli, tmp_path, cases_file
):
    out = tmp_path / "o"
    code, text = run_cli("run", cases_file, "-m", "context-precision", "--out", out, "--no-store")
    assert code == 0, text
    assert "Offline scores rank items" in " ".join(text.split())
    assert "contextlens calibrate" in " ".join(text.split())
    report = (out / "latest" / "report.html").read_text()
    assert 'data-role="offline-note"' in report
    code, text = run_cli("run", cases_file, "-m", "context-similarity", "--out", out, "--no-store")
    assert code == 0 and "Offline scores rank items" not in text  # embedding similarity, no model


def test_a_named_tagged_run_writes_the_files_ci_reads(run_cli, tmp_path, cases_file, monkeypatch):
    junitparser = pytest.importorskip("junitparser")
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, text = run_cli(
        "run",
        cases_file,
        "-m",
        "context-precision",
        "--out",
        tmp_path / "out",
        "-q",
        "--name",
        "ci-files",
        "--tag",
        "branch=main",
        "--tag",
        "model=small",
        "--junit",
        tmp_path / "ci" / "junit.xml",
        "--markdown",
        summary,
        "--csv",
        tmp_path / "ci" / "items.csv",
    )
    assert code == 0, text
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "ci" / "junit.xml"))
    names = {c.name for s in xml for c in s}  # the run's gate, its metric's summary
    assert xml.tests == 2 and names == {"max-failures context-precision", "context-precision"}
    written = summary.read_text()
    assert written.startswith("earlier step\n### contextlens run `")  # appended
    assert "| context-precision | offline |" in written
    rows = (tmp_path / "ci" / "items.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("case_id,metric,score,status")
    (info,) = RunStore().list_runs(name="ci-files")
    assert info.tags == {"branch": "main", "model": "small"}
    code, text = run_cli("runs", "--tag", "model=small", "--html", tmp_path / "index.html")
    assert code == 0 and info.run_id in text and "branch=main" in text
    assert f'href="out/{info.run_id}/report.html"' in (tmp_path / "index.html").read_text()


def test_a_run_that_passes_its_gates_writes_a_junit_file_without_failures(
    run_cli, tmp_path, cases_file
):
    junitparser = pytest.importorskip("junitparser")
    base = ["run", cases_file, "-m", "faithfulness", "--out", tmp_path / "o", "-q", "--no-store"]
    base += ["--threshold", "faithfulness=0.99", "--fail-under", "faithfulness=0.3"]
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    code, text = run_cli(*base, "--junit", junit, "--markdown", summary)
    assert code == 0, text
    written = json.loads((tmp_path / "o" / "latest" / "summary.json").read_text())
    s = written["summaries"]["faithfulness"]
    assert (s["n_scored"], s["n_passed"]) == (3, 0)  # every item below its pass mark
    xml = junitparser.JUnitXml.fromfile(str(junit))
    assert (xml.failures, xml.errors) == (0, 0)
    cases = {c.name: c for suite in xml for c in suite}
    assert set(cases) == {"fail-under faithfulness", "max-failures faithfulness", "faithfulness"}
    assert all(c.is_passed for c in cases.values())
    assert "**Gates: all 2 met**." in summary.read_text()
    code, text = run_cli(*base, "--junit", junit, "--junit-items")
    assert code == 0, text
    xml = junitparser.JUnitXml.fromfile(str(junit))  # asked for: a test per item, below fails
    assert (xml.tests, xml.failures) == (6, 3)
    code, text = run_cli(*base, "--junit-items")
    assert code == 2 and "--junit PATH" in text


def test_a_missed_fail_under_fails_in_junit_and_the_markdown_and_exits_1(
    run_cli, tmp_path, cases_file
):
    junitparser = pytest.importorskip("junitparser")
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    code, text = run_cli(
        "run",
        cases_file,
        "-m",
        "faithfulness",
        "--out",
        tmp_path / "o",
        "-q",
        "--no-store",
        "--fail-under",
        "faithfulness=0.99",
        "--junit",
        junit,
        "--markdown",
        summary,
    )
    assert code == 1 and "threshold missed faithfulness: mean " in text
    mean = json.loads((tmp_path / "o" / "latest" / "summary.json").read_text())["summaries"][
        "faithfulness"
    ]["mean"]
    xml = junitparser.JUnitXml.fromfile(str(junit))
    assert (xml.failures, xml.errors) == (1, 0)
    [gates] = [suite for suite in xml if suite.name == "gates"]
    failed = {c.name: c.result for c in gates if not c.is_passed}
    [failure] = failed.pop("fail-under faithfulness")
    assert not failed and failure.message == f"faithfulness: mean {mean:.3f} < 0.99"
    written = summary.read_text()
    assert f"> **Missed:** fail-under faithfulness: mean {mean:.3f} \\< 0.99" in written
    assert f"| fail-under faithfulness | missed | mean {mean:.3f} | \\>= 0.99 |" in written


def test_bad_names_tags_and_output_paths_are_usage_errors(run_cli, tmp_path, cases_file):
    base = ["run", cases_file, "-m", "context-precision", "--out", tmp_path / "o", "-q"]
    code, text = run_cli(*base, "--tag", "novalue")
    assert code == 2 and "--tag expects KEY=VALUE" in text
    code, text = run_cli(*base, "--junit", tmp_path)
    assert code == 2 and "--junit" in text and "folder" in text
    assert not (tmp_path / "o").exists()  # refused before the run


def test_compare_folders_says_where_the_runs_differ_and_trend_follows_a_name(
    run_cli, tmp_path, cases_file
):
    changed = tmp_path / "changed.jsonl"
    rows = [json.loads(x) for x in cases_file.read_text().splitlines()]
    rows[1]["actual_output"] = "Parking is free."
    rows.append({**rows[0], "id": "c9"})
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for data in (cases_file, changed, changed):
        code, text = run_cli(
            "run",
            data,
            "-m",
            "context-precision",
            "--out",
            tmp_path / "o",
            "-q",
            "--name",
            "followed",
        )
        assert code == 0, text
    first, second, _ = (i.run_id for i in reversed(RunStore().list_runs(name="followed")))
    code, text = run_cli(
        "compare", tmp_path / "o" / first, tmp_path / "o" / second, "--out", tmp_path / "cmp"
    )
    assert code == 0, text
    assert "warning the cases' data differ" in text
    assert "warning the case sets differ: 0 case(s) only in A, 1 only in B" in text
    assert re.search(r"c1\s+│?\s*context-precision.*regressed", text), text
    assert (tmp_path / "cmp" / f"compare-{first}-{second}.html").exists()
    code, text = run_cli("trend", "--name", "followed", "--out", tmp_path / "trend.html")
    assert code == 0, text
    assert "3 runs, oldest first" in text and (tmp_path / "trend.html").exists()
    code, text = run_cli("trend", first)
    assert code == 2 and "2 or more" in text


def test_compare_writes_beside_the_runs_says_a_and_b_and_its_tolerance(
    run_cli, tmp_path, cases_file, monkeypatch
):
    changed = tmp_path / "changed.jsonl"
    rows = [json.loads(x) for x in cases_file.read_text().splitlines()]
    rows[1]["actual_output"] = "Parking is free."
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for data in (cases_file, changed):
        code, text = run_cli("run", data, "-m", "context-precision", "--out", tmp_path / "o",
                             "-q", "--name", "beside")  # fmt: skip
        assert code == 0, text
    first, second = (i.run_id for i in reversed(RunStore().list_runs(name="beside")))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, text = run_cli("compare", first, second)
    assert code == 0, text
    page = tmp_path / "o" / "comparisons" / f"compare-{first}-{second}.html"
    assert page.exists() and not (elsewhere / "contextlens-out").exists()  # beside the runs
    assert f"A = beside ({first}), B = beside ({second}); B - A" in text
    assert "tolerance context-precision: ±0.001, the smallest: 3 paired case(s) are too few" in text
    assert re.search(r"c1\s+│?\s*context-precision.*regressed", text), text
    html = page.read_text()
    assert f"contextlens comparison: A = beside ({first}), B = beside ({second})" in html
    links = json.loads(html.split('id="cl-changes">')[1].split("</script>")[0])["reports"]
    assert links == {"a": f"../{first}/report.html", "b": f"../{second}/report.html"}
    # a tolerance given: the drop is within it; where the page goes, as --out says
    code, text = run_cli("compare", first, second, "--tolerance", "context-precision=1",
                         "--out", tmp_path / "given.html")  # fmt: skip
    assert code == 0, text
    assert "tolerance context-precision: ±1, as given; 1 case(s) within it" in text
    assert not re.search(r"c1\s+│?\s*context-precision", text), text  # no change to list
    assert (tmp_path / "given.html").exists()
    for bad, said in (("x=abc", "--tolerance expects"), ("-1", "--tolerance expects"),
                      ("nope=0.1", "a tolerance for no metric of the runs: ['nope']")):  # fmt: skip
        code, text = run_cli("compare", first, second, "--tolerance", bad)
        assert code == 2 and said in text, text
