"""Values nested too deeply are refused where they come in, before any judge call, naming
the file, the line and the field: JSONL lines, CSV cells (JSON and Python literals), Parquet
and DataFrame cells, dicts and models given in Python. A run store without its tables is a
message, never a traceback."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from contextlens import ModelTestCase, evaluate
from contextlens.errors import InputError
from contextlens.nesting import MAX_DEPTH, text_too_deep, value_too_deep
from contextlens.results import EvalRun
from contextlens.runner import latest_run
from contextlens.schemas import MetricResult
from contextlens.store import RunStore, StoreError
from contextlens.testing import FakeOpenAIServer

PRECISION = json.dumps({"reason": "Matches.", "score": 0.8})
DEEP = "nested too deeply"


def lists(depth: int, leaf: str = "1") -> str:
    """A JSON (or Python) text of ``depth`` lists inside one another."""
    return "[" * depth + leaf + "]" * depth


def nested(depth: int, leaf: object = 1) -> object:
    """A Python value of ``depth`` lists inside one another, made without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def row(i: int, **extra: object) -> dict[str, object]:
    return {
        "id": f"c{i}",
        "input": f"When do you open on day {i}?",
        "actual_output": "At 9 am.",
        "expected_output": "9 am.",
        "retrieval_context": ["We open at 9 am."],
        **extra,
    }


def run_paid(run_cli, path: Path, *more: str) -> tuple[int, str, int]:
    """``contextlens run`` on ``path`` against a judge that counts its calls."""
    with FakeOpenAIServer(reply=lambda r: PRECISION) as server:
        code, text = run_cli(
            "run", path, "-m", "context-precision", "--judge", f"{server.base_url}#m",
            "--no-store", "--cache", "off", "-q", *more,
        )  # fmt: skip
        return code, text, server.calls


# --- JSONL ----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH, 200, 500, 989, 50_000])
def test_a_jsonl_meta_value_too_deep_is_refused_before_any_call(run_cli, tmp_path, depth):
    path = tmp_path / "cases.jsonl"
    deep = '{"id": "c1", "input": "q?", "actual_output": "a", "retrieval_context": ["x"], '
    deep += f'"meta": {{"x": {lists(depth)}}}}}'
    path.write_text(json.dumps(row(0)) + "\n" + deep + "\n")
    code, text, calls = run_paid(run_cli, path, "--out", str(tmp_path / "out"))
    assert calls == 0 and code == 2, text
    assert f"{path}:2: field 'meta.x': the value is {DEEP}" in text, text
    assert "Traceback" not in text and not (tmp_path / "out").exists()


def test_a_meta_value_at_the_limit_runs_and_its_cases_read_back(run_cli, tmp_path):
    path = tmp_path / "cases.jsonl"
    meta = {"x": nested(MAX_DEPTH - 1)}  # meta is level 1, its lists the other 63
    path.write_text(json.dumps(row(0)) + "\n" + json.dumps(row(1, meta=meta)) + "\n")
    code, text, calls = run_paid(run_cli, path, "--out", str(tmp_path / "out"))
    assert code == 0 and calls == 2, text
    run = EvalRun.from_folder(latest_run(tmp_path / "out"))
    assert run.cases()["c1"].meta == meta  # the run's own cases.jsonl reads back
    assert sorted(r.case_id for r in run.iter_results()) == ["c0", "c1"]


# --- CSV cells: JSON and Python literals ----------------------------------------------------


@pytest.mark.parametrize(
    ("column", "cell", "field"),
    [
        ("meta", '{"a": ' + lists(50_000) + "}", "meta.a"),
        ("meta", "{'a': " + "(" * 50_000 + "1" + ")" * 50_000 + "}", "meta.a"),
        ("meta", "{'a': " + "{'b': " * 50_000 + "1" + "}" * 50_000 + "}", "meta.a"),
        ("retrieval_context", "['x', " + lists(50_000, "'y'") + "]", "retrieval_context[1]"),
        ("retrieval_context", "[" + lists(MAX_DEPTH, '"y"') + "]", "retrieval_context[0]"),
    ],
)
def test_a_csv_cell_too_deep_is_refused_naming_its_line_and_field(
    run_cli, tmp_path, column, cell, field
):
    path = write_csv(tmp_path / "cases.csv", {column: cell})
    code, text, calls = run_paid(run_cli, path, "--out", str(tmp_path / "out"))
    assert calls == 0 and code == 2, text
    assert f"{path}:2: field '{field}': the value is {DEEP}" in text, text
    assert "Traceback" not in text


def write_csv(path: Path, cells: dict[str, str]) -> Path:
    """A CSV file of one case, its cells those of ``row(0)`` with ``cells`` over them."""
    values = {**row(0), "retrieval_context": '["We open at 9 am."]', **cells}
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(values)
        out.writerow(values.values())
    return path


def test_a_csv_cell_at_the_limit_is_read(run_cli, tmp_path):
    path = write_csv(tmp_path / "cases.csv", {"meta": "{'a': " + lists(MAX_DEPTH - 1) + "}"})
    code, text, calls = run_paid(run_cli, path, "--out", str(tmp_path / "out"))
    assert code == 0 and calls == 1, text


# --- Parquet, DataFrames, dicts and models given in Python -----------------------------------


def structs(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_parquet_cell_too_deep_is_refused_naming_its_row_and_column(run_cli, tmp_path):
    path = tmp_path / "cases.parquet"
    pd.DataFrame([row(0, meta=structs(MAX_DEPTH + 6))]).to_parquet(path)  # structs, by pyarrow
    code, text, calls = run_paid(run_cli, path, "--out", str(tmp_path / "out"))
    assert calls == 0 and code == 2, text
    assert f"{path}:1: field 'meta.a': the value is {DEEP}" in text, text


class Counting:
    """A stand-in metric that counts what it scores."""

    name = "counting"
    case_type = ModelTestCase

    def __init__(self) -> None:
        self.scored = 0

    async def score(self, case: ModelTestCase, services: object) -> MetricResult:
        self.scored += 1
        return MetricResult(metric=self.name, score=1.0)


def test_a_dataframe_cell_50000_deep_is_refused_naming_its_row(tmp_path):
    metric = Counting()
    frame = pd.DataFrame([row(0), row(1, meta={"x": nested(50_000)})])
    with pytest.raises(InputError) as raised:
        evaluate(frame, [metric], progress=False, cache=False, out=tmp_path / "out")
    assert raised.value.file == "DataFrame" and raised.value.line == 1
    assert raised.value.field == "meta.x" and DEEP in str(raised.value)
    assert metric.scored == 0


@pytest.mark.parametrize("depth", [MAX_DEPTH, 500, 989, 50_000])
def test_a_dict_given_in_python_too_deep_is_refused_before_any_case_is_scored(tmp_path, depth):
    metric = Counting()
    cases = [row(0), row(1, meta={"x": nested(depth)})]
    with pytest.raises(InputError) as raised:
        evaluate(cases, [metric], progress=False, cache=False, out=tmp_path / "out")
    assert "case 1" in str(raised.value) and raised.value.field == "meta.x"
    assert DEEP in str(raised.value) and metric.scored == 0
    assert not list((tmp_path / "out").rglob("results.jsonl"))


def session(meta: object) -> dict[str, object]:
    turn = {"qa_id": "q1", "query": "When?", "assistant": "At 9.", "meta": meta}
    return {
        "session_id": "s1",
        "assistant_id": "a",
        "context": "Open at 9.",
        "conversation": [turn],
    }


def test_a_session_whose_turn_is_too_deep_is_refused_in_a_file_and_in_python(run_cli, tmp_path):
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(session({"x": nested(MAX_DEPTH)})) + "\n")
    code, text = run_cli("run", path, "-m", "context", "--no-store", "--out", tmp_path / "out")
    assert code == 2 and f"{path}:1: field 'conversation[0]': the value is {DEEP}" in text, text
    with pytest.raises(InputError) as raised:
        evaluate([session({"x": nested(5_000)})], ["context"], progress=False, cache=False)
    assert raised.value.field == "conversation[0]" and DEEP in str(raised.value)


def test_a_model_given_in_python_too_deep_or_cyclic_is_refused_when_made():
    with pytest.raises(ValidationError, match=f"meta.x.*{DEEP}"):
        ModelTestCase(input="q", meta={"x": nested(500)})
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    with pytest.raises(ValidationError, match=DEEP):
        ModelTestCase(input="q", meta=cycle)
    assert ModelTestCase(input="q", meta={"x": nested(MAX_DEPTH - 1)}).meta["x"]


# --- the checks themselves ------------------------------------------------------------------


def test_brackets_inside_strings_do_not_count_and_the_limit_is_exact():
    assert text_too_deep(json.dumps({"t": "[" * 500})) is None
    assert text_too_deep("['" + "[" * 500 + '\', "]]]"]', python=True) is None
    assert text_too_deep("'''it's " + "[" * 500 + "'''", python=True) is None
    assert text_too_deep(lists(MAX_DEPTH)) is None
    assert text_too_deep(lists(MAX_DEPTH + 1)) is not None
    found = text_too_deep('{"a\\"b": [1, 2, ' + lists(MAX_DEPTH) + "]}", MAX_DEPTH + 1)
    assert found is not None and found.field() == 'a"b[2]'
    assert value_too_deep(nested(MAX_DEPTH)) is None
    assert value_too_deep(nested(MAX_DEPTH + 1)) is not None
    shared = [nested(10)]
    assert value_too_deep([shared] * 10_000) is None  # shared parts are walked once per depth


# --- the run store --------------------------------------------------------------------------


def test_a_store_without_its_tables_is_a_message_in_every_command(run_cli, tmp_path):
    store = tmp_path / "runs.sqlite3"
    RunStore(store).close()
    with sqlite3.connect(store) as conn:
        conn.execute("DROP TABLE runs")
    with pytest.raises(StoreError, match="has no 'runs' table: it is damaged"):
        RunStore(store)
    for command in (("runs",), ("compare", "a1", "b2"), ("trend", "a1", "b2")):
        code, text = run_cli(*command, "--store", store)
        assert code == 2 and f"the run store {store} has no 'runs' table" in text, text
        assert "Traceback" not in text
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(row(0)) + "\n")
    with FakeOpenAIServer(reply=lambda r: PRECISION) as server:
        code, text = run_cli(
            "run", cases, "-m", "context-precision", "--judge", f"{server.base_url}#m",
            "--store", store, "--cache", "off", "-q", "--out", tmp_path / "out",
        )  # fmt: skip
    assert code == 0 and "not recorded in the run store" in text, text  # a side file


def test_a_store_lacking_columns_or_damaged_on_read_is_a_store_error(tmp_path):
    store = tmp_path / "runs.sqlite3"
    RunStore(store).close()
    with sqlite3.connect(store) as conn:
        conn.execute("DROP TABLE items")
        conn.execute("CREATE TABLE items (run_id TEXT, seq INTEGER)")
    with pytest.raises(StoreError, match=r"lacks the column\(s\) case_id, metric, score and 2"):
        RunStore(store)
    other = tmp_path / "other.sqlite3"
    opened = RunStore(other)
    with sqlite3.connect(other) as conn:
        conn.execute("DROP TABLE runs")
    for read in (opened.list_runs, lambda: opened.load("x")):
        with pytest.raises(StoreError, match=r"cannot read the run store .*no such table: runs"):
            read()
