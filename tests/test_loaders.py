import csv
import json

import pandas as pd
import pytest

from contextlens import InputError
from contextlens.loaders import load_cases
from contextlens.schemas import Dataset, ModelTestCase

ROWS = [
    {
        "session_id": "s1",
        "assistant_id": "bot",
        "context": "Open 9-5.",
        "qa_id": "q1",
        "query": "hours?",
        "assistant": "9-5",
        "ground_truth_assistant": "",
        "weight": 0.5,
    },
    {
        "session_id": "s2",
        "assistant_id": "bot",
        "context": "Closed Sunday.",
        "qa_id": "q1",
        "query": "sunday?",
        "assistant": "closed",
        "ground_truth_assistant": "closed",
        "weight": None,
    },
    {
        "session_id": "s1",
        "assistant_id": "bot",
        "context": "Open 9-5.",
        "qa_id": "q2",
        "query": "today?",
        "assistant": "yes",
        "ground_truth_assistant": "",
        "weight": None,
    },
]
CASES = [
    {"id": "c1", "input": "what?", "actual_output": "this", "retrieval_context": ["a", "b"]},
    {"id": "c2", "question": "who?", "answer": "me", "contexts": ["c"]},
]


def write_csv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    k: json.dumps(v) if isinstance(v, list) else ("" if v is None else v)
                    for k, v in row.items()
                }
            )


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_session_rows_are_grouped_in_every_format(tmp_path, fmt):
    path = tmp_path / f"s.{fmt}"
    {"csv": write_csv, "jsonl": write_jsonl}.get(fmt, lambda p, r: pd.DataFrame(r).to_parquet(p))(
        path, ROWS
    )
    kind, cases = load_cases(path)
    sessions = list(cases)
    assert kind == "sessions" and all(isinstance(s, Dataset) for s in sessions)
    assert [s.session_id for s in sessions] == ["s1", "s2"]
    assert [b.qa_id for b in sessions[0].conversation] == ["q1", "q2"]
    assert sessions[0].conversation[0].weight == 0.5
    assert sessions[0].conversation[1].weight is None


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_test_cases_with_aliases_in_every_format(tmp_path, fmt):
    path = tmp_path / f"c.{fmt}"
    rows = [{**CASES[0], "question": None, "answer": None, "contexts": None}, CASES[1]]
    rows = [{k: v for k, v in r.items()} for r in rows] if fmt == "parquet" else CASES
    {"csv": write_csv, "jsonl": write_jsonl}.get(fmt, lambda p, r: pd.DataFrame(r).to_parquet(p))(
        path, rows
    )
    kind, cases = load_cases(path)
    cases = list(cases)
    assert kind == "test_cases" and all(isinstance(c, ModelTestCase) for c in cases)
    assert cases[0].name == "c1" and cases[0].retrieval_context == ["a", "b"]
    assert cases[1].input == "who?" and cases[1].actual_output == "me"
    assert cases[1].retrieval_context == ["c"]


def test_session_objects_per_line(tmp_path):
    path = tmp_path / "sessions.jsonl"
    session = {
        "session_id": "x",
        "assistant_id": "b",
        "context": "c",
        "conversation": [{"qa_id": "q", "query": "q", "assistant": "a"}],
    }
    write_jsonl(path, [session])
    kind, cases = load_cases(path)
    assert kind == "sessions" and next(cases).session_id == "x"


def test_bad_weight_in_csv_names_line_and_field(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[2]["weight"] = "heavy"
    path = tmp_path / "s.csv"
    write_csv(path, rows)
    with pytest.raises(InputError) as info:
        load_cases(path)
    assert (info.value.line, info.value.field) == (4, "weight")
    assert "s.csv:4" in str(info.value)


def test_inconsistent_session_context_is_an_error(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[2]["context"] = "Something else."
    path = tmp_path / "s.csv"
    write_csv(path, rows)
    with pytest.raises(InputError, match="differs from line 2") as info:
        load_cases(path)
    assert info.value.field == "context"


def test_a_case_without_a_question_is_read(tmp_path):
    path = tmp_path / "c.jsonl"
    write_jsonl(path, [CASES[0], {"id": "c3", "actual_output": "x"}])
    _, cases = load_cases(path)
    assert [c.input for c in cases] == [CASES[0]["input"], ""]


def test_bad_json_array_cell(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text('input,retrieval_context\nq,"[""a"", "\n')
    _, cases = load_cases(path)
    with pytest.raises(InputError, match="not a JSON array") as info:
        list(cases)
    assert info.value.field == "retrieval_context"


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_cases(tmp_path / "nope.csv")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no rows"):
        load_cases(tmp_path / "empty.jsonl")
