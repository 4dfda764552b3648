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
