"""The command's output: user text is printed as text, never as Rich markup, with control
characters escaped; written to a pipe, numbers and ids are shown whole."""

import json
import re

import pytest

from contextlens.terminal import line, safe, table
from contextlens.testing import FakeOpenAIServer

ESC = "\x1b"
HOSTILE_ID = (
    f"case [/x] [bold]{ESC}[31mred{ESC}[0m a-rather-long-identifier-that-must-not-be-cut-0001"
)


def test_safe_escapes_control_characters_and_keeps_text():
    assert safe(f"a{ESC}[31mb\rc\x00d\x9b") == "a\\x1b[31mb\\x0dc\\x00d\\x9b"
    assert safe("tab\tand\nnewline [/x]") == "tab\tand\\x0anewline [/x]"  # one line of text
    assert line("[/x] ", 3).plain == "[/x] 3"
    grid = table("[/title]", ["name", "n"], [["[/x]", 12345678]], numeric=["n"])
    assert grid.columns[1].min_width == 8


@pytest.fixture
def hostile_file(tmp_path):
    folder = tmp_path / "data [/x]"  # "/" divides: the folder "data [" holds "x]"
    folder.mkdir(parents=True)
    path = folder / "cases[v2].jsonl"
    rows = [
        {
            "id": HOSTILE_ID,
            "input": "When do you open? [/x]",
            "actual_output": "At 9 [red]am",
            "retrieval_context": ["We open at 9 am. [/i]"],
        },
        {"id": "plain", "input": "When?", "actual_output": "At 9.", "retrieval_context": ["9 am."]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_run_prints_user_text_as_text(run_cli, hostile_file, tmp_path):
    with FakeOpenAIServer(
        reply=lambda r: '{"reason": "ok [/x] \\u001b[2J", "score": 0.5}'
    ) as server:
        code, text = run_cli(
            "run",
            hostile_file,
            "-m",
            "context-precision",
            "--judge",
            f"{server.base_url}#judge[/x]",
            "--out",
            tmp_path / "out [/y]",
            "-q",
            "--no-store",
        )
    assert code == 0, text
    assert re.search(r"out \[/y\]/[0-9a-f]{12}/results\.jsonl", text)
    assert "openai-compat:judge[/x]" in text  # the judge's name as given
    assert "0.500" in text  # the mean, whole
    assert ESC not in text


def test_an_error_naming_hostile_text_is_printed_as_text(run_cli, tmp_path):
    bad = tmp_path / "bad [/x].jsonl"
    bad.parent.mkdir(parents=True)
    good = {"input": "q", "actual_output": "a", "retrieval_context": ["c"]}
    bad.write_text(json.dumps(good) + '\n{"nope": 1}\n', encoding="utf-8")
    code, text = run_cli("run", bad, "-m", "context-similarity", "--out", tmp_path / "o")
    assert code == 2 and "Traceback" not in text
    assert "bad [/x].jsonl:2" in text


def test_failed_items_are_named_by_case_id_and_exit_3(run_cli, hostile_file, tmp_path):
    with FakeOpenAIServer(reply=lambda r: "no json here") as server:
        code, text = run_cli(
            "run",
            hostile_file,
            "-m",
            "context-precision",
            "--judge",
            f"{server.base_url}#m",
            "--out",
            tmp_path / "o",
            "-q",
            "--no-store",
        )
    assert code == 3, text
    assert "2 of 2 items failed" in text
    assert "a-rather-long-identifier-that-must-not-be-cut-0001" in text
    assert "\\x1b[31mred" in text and ESC not in text


def test_max_failures_tolerates_a_share(run_cli, hostile_file, tmp_path):
    def reply(request: dict) -> str:  # the first case never gets a valid verdict
        prompt = request["messages"][-1]["content"] + request["messages"][1]["content"]
        return "no verdict" if "When do you open" in prompt else '{"reason": "ok", "score": 1}'

    with FakeOpenAIServer(reply=reply) as server:
        args = [
            "run",
            hostile_file,
            "-m",
            "context-precision",
            "--judge",
            f"{server.base_url}#m",
            "-q",
            "--no-store",
        ]
        code, text = run_cli(*args, "--out", tmp_path / "a", "--max-failures", "50%")
        assert code == 0, text
        code, text = run_cli(*args, "--out", tmp_path / "b", "--max-failures", "0")
        assert code == 3 and "1 of 2 items failed" in text
    code, text = run_cli(*args, "--out", tmp_path / "c", "--max-failures", "lots")
    assert code == 2 and "--max-failures" in text


def test_calibrate_slices_with_markup_in_their_values(run_cli, tmp_path):
    rows = [
        {
            "id": f"r{i}",
            "question": "When?",
            "answer": "At 9 am." if i % 2 else "Never.",
            "contexts": ["We open at 9 am."],
            "label": i % 2,
            "meta": {"domain": f"[/x]{i % 2}"},
        }
        for i in range(6)
    ]
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, text = run_cli(
        "calibrate",
        data,
        "--metric",
        "context-precision",
        "--by",
        "meta.domain",
        "--out",
        tmp_path / "cal",
        "-q",
    )
    assert code == 0, text
    assert re.search(r"\[/x\]0", text) and re.search(r"\[/x\]1", text)


# -- tables at any width ---------------------------------------------------------------------

METRICS = ["contextual-relevancy", "context-precision:strict", "context-similarity"]


def _run_table():
    from contextlens.cli.run import summary_table
    from contextlens.results import EvalRun, MetricSummary

    summaries = {
        key: MetricSummary(
            metric=key,
            n=300,
            n_scored=297,
            n_failed=3,
            mean=0.8125,
            ci_low=0.79,
            ci_high=0.833,
            judge="http://127.0.0.1:8080/v1#qwen2.5-7b-instruct" if i else "offline",
            seconds=12.5,
            accounting={"calls": 300, "prompt_tokens": 120000, "completion_tokens": 8000},
        )
        for i, key in enumerate(METRICS)
    }
    run = EvalRun(
        run_id="3f2a9c1e0b7d",
        started_at="",
        duration_s=1.0,
        judge="j",
        embedder="e",
        repeats=1,
        summaries=summaries,
        accounting={"total": {"cache_hits": 0}},
        out_dir="contextlens-out/3f2a9c1e0b7d",
    )
    return summary_table(run)


def _printed(renderable, width: int) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, markup=False, highlight=False).print(renderable)
    return buffer.getvalue()


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_a_short_terminal_stacks_the_run_table_with_every_name_whole(width):
    shown = _printed(_run_table(), width)
    lines = shown.splitlines()
    assert all(len(x) <= width for x in lines), max(lines, key=len)
    for key in METRICS:
        assert key in lines  # each metric heads its block, whole, on a line of its own
    assert shown.count("http://127.0.0.1:8080/v1#qwen2.5-7b-instruct") == 2  # never cut
    assert shown.count("[0.790, 0.833]") == 3 and "120,000/8,000" in shown


def test_a_wide_terminal_shows_the_grid():
    shown = _printed(_run_table(), 200)
    assert "┃ metric" in shown
    rows = [x for x in shown.splitlines() if any(k in x for k in METRICS)]
    assert len(rows) == 3 and all("0.812" in r for r in rows)


def test_an_id_longer_than_the_line_loses_nothing():
    long_id = "case-" + "x" * 120
    shown = _printed(table(None, ["case", "score"], [[long_id, "0.5"]], numeric=["score"]), 80)
    assert long_id in shown.replace("\n", "")  # folded at the edge of the line, never cut


def test_columns_named_to_fold_keep_a_wide_table_a_grid():
    rows = [[f"field-{i}", "an alias, another alias", "x" * 38, "y" * 39] for i in range(3)]
    headers = ["field", "also", "type", "meaning"]
    stacked = _printed(table(None, headers, rows), 100)
    assert "┃ field" not in stacked and "field-0" in stacked.splitlines()
    grid = _printed(table(None, headers, rows, fold=headers), 100)
    assert "┃ field" in grid and all(len(x) <= 100 for x in grid.splitlines())
    assert grid.count("x") == 3 * 38 and "│         │" in grid  # folded onto a second line


# -- what the run table shows ----------------------------------------------------------------

RAG = [
    {
        "id": f"c{i}",
        "input": "What are the opening hours?",
        "actual_output": "We open at 9am." if i % 2 else "Parking is free.",
        "expected_output": "9am to 5pm.",
        "retrieval_context": ["The shop opens at 9am and closes at 5pm.", "Parking is free."],
    }
    for i in range(4)
]


def _header(shown: str) -> list[str]:
    """The grid's header cells (empty when the table was printed stacked)."""
    line_ = next((x for x in shown.splitlines() if x.startswith("┃")), "")
    return [cell.strip() for cell in line_.strip().strip("┃").split("┃")] if line_ else []


@pytest.mark.parametrize(
    "metrics", [["contextual-relevancy"], ["context-precision", "context-recall"]]
)
def test_an_offline_run_table_leaves_out_what_no_judge_gave_and_fits_100_columns(metrics):
    from contextlens.cli.run import summary_table
    from contextlens.runner import evaluate
    from contextlens.schemas import ModelTestCase

    cases = [ModelTestCase(name=r["id"], **{k: v for k, v in r.items() if k != "id"}) for r in RAG]
    run = evaluate(cases, metrics, cache=False, progress=False)
    shown = _printed(summary_table(run), 100)
    assert _header(shown) == ["metric", "mean", "interval", "pass", "n", "failed", "time"]
    assert all(len(x) <= 100 for x in shown.splitlines())
    assert "judge offline" in shown and "wall time" in shown
    assert "tokens" not in shown and "cache hits" not in shown  # nothing to say offline


def test_a_judged_run_table_keeps_its_judge_calls_tokens_and_cost():
    shown = _printed(_run_table(), 240)
    headers = ["metric", "judge", "mean", "interval", "n", "failed", "calls", "tokens", "cost"]
    assert _header(shown) == [*headers, "time"]  # no pass mark: no pass column


def test_an_offline_run_fits_100_columns_in_a_terminal(tmp_path):
    """The command itself, in a terminal of 100 columns (``COLUMNS``, as rich reads it)."""
    import os
    import subprocess
    import sys

    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RAG), encoding="utf-8")
    from pathlib import Path

    src = str(Path(__file__).parents[1] / "src")  # this tree's package, whatever is installed
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": src}
    args = ["run", str(data), "-m", "context-precision", "-m", "contextual-relevancy"]
    args += ["--out", str(tmp_path / "o"), "-q", "--no-store"]
    done = subprocess.run(
        [sys.executable, "-m", "contextlens", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert _header(done.stdout)[:2] == ["metric", "mean"]  # a grid, not stacked
    rows = [x for x in done.stdout.splitlines() if x.startswith("│ context")]
    assert len(rows) == 2 and all(len(r) <= 100 for r in rows)


# -- columns said once, fallbacks, stacked cells ---------------------------------------------


def test_a_column_every_row_shares_is_said_once_under_the_table():
    rows = [["r1", "offline", "a.jsonl"], ["r2", "offline", "b.jsonl"]]
    shown = _printed(table(None, ["run", "judge", "data"], rows, shared=["judge", "data"]), 80)
    assert _header(shown) == ["run", "data"] and "judge offline" in shown
    one = _printed(table(None, ["run", "judge"], [["r1", "offline"]], shared=["judge"]), 80)
    assert _header(one) == ["run", "judge"]  # one row: nothing is shared


def test_a_table_too_wide_prints_its_fallback():
    wide = table(None, ["a", "b"], [["x" * 50, "y" * 50]], ids=["a", "b"])
    wide.fallback = table(None, ["a"], [["x" * 50]], ids=["a"])
    assert _header(_printed(wide, 120)) == ["a", "b"]
    assert _header(_printed(wide, 80)) == ["a"]


def test_a_stacked_cell_of_several_lines_stays_indented():
    from rich.text import Text

    means = Text("\n").join([Text("context-precision 0.500"), Text("faithfulness 0.578")])
    shown = _printed(table(None, ["run", "means", "x"], [["r1", means, "y" * 70]], ids=["x"]), 60)
    assert "means context-precision 0.500, faithfulness 0.578" in shown
    assert all(x.startswith(("r1", "  ")) for x in shown.splitlines()), shown


# -- runs and trend ----------------------------------------------------------------------------


def _info(run_id, name, tags, means, started="2026-03-01T14:05:09+00:00"):
    from contextlens.store.records import RunInfo

    return RunInfo(
        run_id=run_id,
        started_at=started,
        judge="offline",
        dataset="cases.jsonl",
        n_cases=40,
        n_items=40,
        n_failed=0,
        means=means,
        out_dir=f"contextlens-out/{run_id}",
        name=name,
        tags=tags,
    )


def test_runs_is_an_aligned_table_with_names_and_tags_in_120_columns():
    from contextlens.cli.history import runs_table

    infos = [
        _info("3f2a9c1e0b7d", "nightly-support", {"branch": "main", "model": "qwen2.5-7b"},
              {"context-precision": 0.8125, "faithfulness": 0.7}),
        _info("9b1c0d2e3f4a", "pr-checks", {"branch": "fix-42"}, {"context-precision": None}),
    ]  # fmt: skip
    shown_table, notes = runs_table(infos)
    shown = _printed(shown_table, 120)
    assert _header(shown) == ["run", "started", "status", "name", "tags", "cases", "means"]
    rows = {x.split("│")[1].strip(): x for x in shown.splitlines() if x.startswith("│ ")}
    assert "nightly-support" in rows["3f2a9c1e0b7d"] and "branch=main" in rows["3f2a9c1e0b7d"]
    assert "pr-checks" in rows["9b1c0d2e3f4a"] and "branch=fix-42" in rows["9b1c0d2e3f4a"]
    assert "2026-03-01 14:05" in rows["3f2a9c1e0b7d"] and "context-precision -" in shown
    assert "model=qwen2.5-7b" in shown  # the second tag, on the cell's next line
    assert "judge offline; data cases.jsonl; folder contextlens-out/<run>" in shown
    assert len({x.index("│", 2) for x in shown.splitlines() if x.startswith("│")}) == 1
    assert notes == []


def test_trend_is_a_table_of_runs_with_names_and_tags_and_a_narrower_one_when_needed():
    from contextlens.cli.trend import trend_table
    from contextlens.trend import MetricPoint, RunPoint, Trend

    def point(mean):
        return MetricPoint(mean=mean, ci_low=mean - 0.05, ci_high=mean + 0.05, pass_rate=0.6, n=40)

    metrics = ["context-precision", "contextual-relevancy", "faithfulness"]
    result = Trend(
        runs=[
            RunPoint(run_id=f"run{i:09d}", started_at="2026-03-01T14:05:09+00:00",
                     name="nightly" if i else "baseline", tags={"branch": f"b{i}"},
                     metrics={m: point(0.5 + i / 10) for m in metrics})
            for i in range(3)
        ],
        metrics=metrics,
    )  # fmt: skip
    wide = _printed(trend_table(result), 200)
    assert _header(wide) == ["run", "started", "name", "tags", *metrics]
    assert "0.600 [0.550, 0.650] 60%" in wide and "branch=b2" in wide
    narrow = _printed(trend_table(result), 120)
    assert _header(narrow) == [
        "metric",
        "run",
        "started",
        "name",
        "tags",
        "mean",
        "interval",
        "pass",
        "n",
    ]
    rows = [x for x in narrow.splitlines() if x.startswith("│ faithfulness")]
    assert len(rows) == 3 and "baseline" in rows[0] and "branch=b0" in rows[0]
    assert all(len(x) <= 120 for x in narrow.splitlines())


def test_a_judge_every_metric_shares_is_said_once():
    from contextlens.cli.run import summary_table
    from contextlens.results import EvalRun, MetricSummary

    judge = "http://127.0.0.1:8080/v1#qwen2.5-7b-instruct"
    summaries = {
        key: MetricSummary(
            metric=key, n=3, n_scored=3, n_failed=0, mean=0.5, judge=judge, seconds=1.0,
            accounting={"calls": 3, "prompt_tokens": 900, "completion_tokens": 30},
        )
        for key in ("context-precision", "contextual-relevancy")
    }  # fmt: skip
    run = EvalRun(
        run_id="r", started_at="", duration_s=1.2, judge=judge, embedder="e", repeats=1,
        summaries=summaries, accounting={"total": {"cache_hits": 2}},
    )  # fmt: skip
    shown = _printed(summary_table(run), 120)
    assert _header(shown) == ["metric", "mean", "n", "failed", "calls", "tokens", "cost", "time"]
    assert shown.count(judge) == 1 and f"judge {judge}" in shown and "cache hits 2" in shown


def test_the_two_noncharacters_are_written_out():

    assert safe("id5\ufffe\uffff") == "id5\\ufffe\\uffff"
