"""Data as people hold it: a pandas DataFrame, and the CSV, JSON lines and Parquet files pandas
writes of it, read alike by ``contextlens run`` and ``evaluate``; dicts read as rows are (Ragas's
names, ``meta.KEY`` keys); ``to_pandas()`` with statuses, long and wide."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from contextlens import InputError
from contextlens.loaders import is_frame, load_cases, load_frame
from contextlens.results import STATUSES, EvalRun
from contextlens.runner import evaluate
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer

METRICS = ["retrieval", "faithfulness"]


def rows(n: int = 6, *, graded: bool = True) -> list[dict]:
    """Cases as a user holds them: Ragas-ish column names, list columns of texts, ids and
    tags, graded ids as a dict (different keys per row), a nested ``meta`` dict (different
    keys per row) and a ``meta.topic`` column."""
    out = []
    for i in range(n):
        relevant = {f"dep-0{i % 3}": 2, "dep-09": 1} if i % 2 else {f"dep-0{i % 3}": 1}
        out.append(
            {
                "id": f"c{i:02d}",
                "question": f"When does depot {i} open?",
                "answer": f"Depot {i} opens at {6 + i} am.",
                "reference": None if i % 3 else f"{6 + i} am.",
                "contexts": [f"Depot {i} opens at {6 + i} am.", "Parking is free."],
                "retrieved_ids": [f"dep-0{i % 3}", f"dep-1{i}"],
                "relevant_ids": relevant if graded else [f"dep-0{i % 3}"],
                "tags": ["depots", f"batch-{i % 2}"],
                "meta": {"team": "ops", "reviewed": True} if i % 2 else {"team": "field"},
                "meta.topic": "hours" if i % 2 else "opening",
            }
        )
    return out


def expected_cases(data: list[dict]) -> dict[str, dict]:
    """The cases ``rows()`` stands for, built field by field."""
    return {
        r["id"]: ModelTestCase(
            name=r["id"],
            input=r["question"],
            actual_output=r["answer"],
            expected_output=r["reference"],
            retrieval_context=r["contexts"],
            retrieved_ids=r["retrieved_ids"],
            relevant_ids=r["relevant_ids"],
            tags=r["tags"],
            meta={**r["meta"], "topic": r["meta.topic"]},
        ).model_dump()
        for r in data
    }


def cases_of(run: EvalRun) -> dict[str, dict]:
    return {cid: record.case.model_dump() for cid, record in run.cases().items()}


def scores_of(run: EvalRun) -> dict[tuple[str, str], float | None]:
    return {(r.case_id, str(r.metric)): r.score for r in run.results}


WRITERS = {
    "csv": lambda frame, path: frame.to_csv(path),  # the index too, as pandas writes by default
    "jsonl": lambda frame, path: frame.to_json(path, orient="records", lines=True),
    "parquet": lambda frame, path: frame.to_parquet(path),
}


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("graded", [True, False])
def test_a_frame_written_by_pandas_runs_in_the_cli_as_the_frame(run_cli, tmp_path, fmt, graded):
    data = rows(graded=graded)
    frame = pd.DataFrame(data)
    path = tmp_path / f"cases.{fmt}"
    WRITERS[fmt](frame, path)
    out = tmp_path / "out"
    code, text = run_cli("run", path, "-m", "retrieval", "-m", "faithfulness", "--out", out, "-q")
    assert code == 0, text
    from_file = EvalRun.from_folder(out / "latest")
    in_python = evaluate(frame, METRICS, cache=False, progress=False)
    assert cases_of(from_file) == cases_of(in_python) == expected_cases(data)
    scores = scores_of(from_file)
    assert scores == scores_of(in_python)
    assert len(scores) == 2 * len(data) and all(s is not None for s in scores.values())
    assert {r.status for r in from_file.results} <= {"pass", "below"}


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_a_file_read_back_by_pandas_is_evaluated_as_the_frame_it_was(tmp_path, fmt):
    """A user's DataFrame read back from a file: read_csv leaves lists as their Python text
    and adds an ``Unnamed: 0`` index column; read_parquet gives numpy arrays and structs
    with every row's keys."""
    data = rows()
    path = tmp_path / f"cases.{fmt}"
    WRITERS[fmt](pd.DataFrame(data), path)
    reader = {"csv": pd.read_csv, "parquet": pd.read_parquet}.get(
        fmt, lambda p: pd.read_json(p, orient="records", lines=True)
    )
    again = reader(path)
    assert cases_of(evaluate(again, METRICS, cache=False, progress=False)) == expected_cases(data)


def test_a_named_index_is_a_column_in_a_frame_and_in_its_parquet_file(tmp_path):
    frame = pd.DataFrame(rows(2)).set_index("id")
    frame.to_parquet(tmp_path / "c.parquet")
    _, read = load_cases(tmp_path / "c.parquet")
    assert [c.name for c in read] == ["c00", "c01"]
    assert [c.name for c in load_frame(frame)[1]] == ["c00", "c01"]


def test_sessions_in_a_frame_are_grouped_as_in_a_file(tmp_path):
    columns = ["session_id", "context", "qa_id", "query", "assistant", "meta.channel"]

    def turn(*values):
        return {"assistant_id": "bot", **dict(zip(columns, values, strict=True))}

    turns = [
        turn("s1", "Open 9-5.", 1, "Hours?", "9 to 5.", "chat"),
        turn("s2", "Closed Sunday.", 1, "Sunday?", "Closed.", "mail"),
        turn("s1", "Open 9-5.", 2, "Today?", "Yes.", "chat"),
    ]
    frame = pd.DataFrame(turns)
    kind, sessions = load_frame(frame)
    assert kind == "sessions" and [s.session_id for s in sessions] == ["s1", "s2"]
    assert [b.qa_id for b in sessions[0].conversation] == ["1", "2"]  # numbers read as text
    assert sessions[0].conversation[1].meta == {"channel": "chat"}
    frame.to_parquet(tmp_path / "s.parquet")
    assert list(load_cases(tmp_path / "s.parquet")[1]) == sessions
    wide = evaluate(frame, ["context"], cache=False, progress=False).to_pandas(wide=True)
    assert list(wide["case_id"]) == ["s1", "s2"]
    assert list(wide["context"]) == ["Open 9-5.", "Closed Sunday."]  # the session's, apart
    assert wide["context.score"].notna().all() and set(wide["context.status"]) <= set(STATUSES)


def test_session_objects_in_a_parquet_file_keep_their_interactions(tmp_path):
    """Parquet stores the interactions as structs with every key any of them has: a key an
    interaction did not have is not read as a null."""
    session = {
        "session_id": "s1",
        "assistant_id": "bot",
        "context": "Open 9-5.",
        "conversation": [
            {"qa_id": "q1", "query": "Hours?", "assistant": "9 to 5."},
            {"qa_id": "q2", "assistant": "Yes.", "ground_truth_assistant": "Yes.", "weight": 1.0},
        ],
        "meta": {"channel": "chat"},
    }
    pd.DataFrame([session]).to_parquet(tmp_path / "s.parquet")
    kind, read = load_cases(tmp_path / "s.parquet")
    [only] = list(read)
    assert kind == "sessions" and only.meta == {"channel": "chat"}
    assert [(b.qa_id, b.query, b.ground_truth_assistant) for b in only.conversation] == [
        ("q1", "Hours?", ""),
        ("q2", "", "Yes."),
    ]


# --------------------------------------------------------------------------- Python input


def test_evaluate_takes_a_frame_as_it_takes_the_cases_it_holds():
    data = rows()
    as_models = [ModelTestCase.model_validate(c) for c in expected_cases(data).values()]
    from_frame = evaluate(pd.DataFrame(data), METRICS, cache=False, progress=False)
    from_models = evaluate(as_models, METRICS, cache=False, progress=False)
    assert scores_of(from_frame) == scores_of(from_models)
    assert from_frame.data_fingerprint == from_models.data_fingerprint


def test_a_ragas_style_list_of_dicts_is_taken():
    samples = [
        {
            "user_input": "When does the depot open?",
            "retrieved_contexts": ["The depot opens at 6 am.", "Parking is free."],
            "response": "At 6 am.",
            "reference": "6 am.",
            "retrieved_context_ids": ["dep-01", "dep-07"],
            "reference_context_ids": ["dep-01"],
            "persona_name": "night shift driver",
            "synthesizer_name": "single_hop_specific_query_synthesizer",
            "meta.topic": "hours",
        }
    ]
    run = evaluate(samples, METRICS, cache=False, progress=False)
    [record] = run.cases().values()
    case = record.case
    assert (case.input, case.actual_output, case.expected_output) == (
        "When does the depot open?",
        "At 6 am.",
        "6 am.",
    )
    assert (case.retrieved_ids, case.relevant_ids) == (["dep-01", "dep-07"], ["dep-01"])
    assert case.persona_name == "night shift driver" and case.meta == {"topic": "hours"}
    assert run.summary("retrieval").n_scored == run.summary("faithfulness").n_scored == 1


def test_meta_keys_and_nested_meta_work_in_python_as_in_files(tmp_path):
    given = {"input": "q?", "contexts": ["c"], "meta.topic": "hours", "meta_team": "ops"}
    given["meta"] = {"lang": "en"}
    run = evaluate([given], ["contextual-relevancy"], cache=False, progress=False)
    assert next(iter(run.cases().values())).meta == {"lang": "en", "topic": "hours", "team": "ops"}
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(given) + "\n")
    assert next(load_cases(path)[1]).meta == {"lang": "en", "topic": "hours", "team": "ops"}
    deepeval_style = {"input": "q?", "contexts": ["c"], "additional_metadata": {"source": "web"}}
    deepeval_run = evaluate([deepeval_style], ["contextual-relevancy"], cache=False, progress=False)
    assert deepeval_run.cases()["case-000000"].meta == {"source": "web"}
    with pytest.raises(InputError, match="the meta key 'topic' is given twice") as info:
        evaluate([{**given, "meta": {"topic": "other"}}], ["contextual-relevancy"], cache=False)
    assert info.value.field == "meta.topic" and "case 0" in str(info.value)


def test_the_case_models_take_meta_keys_too():
    case = ModelTestCase.model_validate({"input": "q?", "meta.topic": "hours", "meta_team": ""})
    assert case.meta == {"topic": "hours"}  # a blank value is absent, as in a CSV cell
    assert ModelTestCase(input="q?", meta={"a": 1}, meta_team="ops").meta == {"a": 1, "team": "ops"}
    with pytest.raises(ValueError, match="the meta key 'a' is given twice"):
        ModelTestCase.model_validate({"input": "q?", "meta": {"a": 1}, "meta.a": 2})


def test_a_metadata_column_in_csv_is_kept_as_meta(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("id,input,metadata\nc1,q?,\"{'team': 'ops', 'rank': 2}\"\n")
    [only] = list(load_cases(path)[1])
    assert only.meta == {"team": "ops", "rank": 2}


def test_pandas_stays_optional(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    assert not is_frame([{"input": "q?"}])
    given = {"input": "q?", "retrieved_ids": "dep-01", "relevant_ids": "['dep-01']"}
    run = evaluate([given], ["retrieval"], cache=False, progress=False)
    assert run.summary("retrieval").mean == 1.0
    with pytest.raises(ImportError, match="pip install pandas"):
        run.to_pandas()


# --------------------------------------------------------------------------- errors


def test_errors_name_the_frame_the_row_and_the_column_before_any_judge_call():
    data = rows(4)
    with pytest.raises(InputError) as info:
        evaluate(pd.DataFrame([*data[:3], {**data[3], "qestion": "x"}]), METRICS, cache=False)
    assert (info.value.file, info.value.line, info.value.field) == ("DataFrame", None, "qestion")
    assert "did you mean 'question'?" in str(info.value)
    bad = pd.DataFrame([*data[:3], {**data[3], "relevant_ids": "{'dep-01': 2"}])
    with pytest.raises(InputError, match="not a JSON object or a Python dict") as info:
        evaluate(bad, METRICS, cache=False)
    assert (info.value.file, info.value.line, info.value.field) == ("DataFrame", 3, "relevant_ids")
    missing = pd.DataFrame([*data[:3], {**data[3], "answer": None}])
    with FakeOpenAIServer() as server:
        with pytest.raises(InputError, match="requires 'actual_output', which is missing") as info:
            evaluate(missing, ["context-precision"], judge=f"{server.base_url}#m", cache=False)
        assert server.calls == 0
    assert (info.value.file, info.value.line, info.value.field) == ("DataFrame", 3, "actual_output")
    twice = pd.DataFrame([data[0], {**data[1], "id": "c00"}])
    with pytest.raises(InputError, match="duplicate id 'c00' \\(also on row 0\\)") as info:
        evaluate(twice, METRICS, cache=False)
    assert (info.value.line, info.value.field) == (1, "id")


def test_a_bad_list_in_a_csv_names_the_file_line_and_field(run_cli, tmp_path):
    frame = pd.DataFrame(rows(3))
    frame.loc[1, "retrieved_ids"] = "['dep-01', 'dep-02'"
    frame.to_csv(tmp_path / "c.csv")
    code, text = run_cli("run", tmp_path / "c.csv", "-m", "retrieval", "--out", tmp_path / "o")
    assert code == 2
    assert "c.csv:3: field 'retrieved_ids': not a JSON array or a Python list" in text


def test_a_python_literal_is_read_never_evaluated(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("input,retrieved_ids\nq?,\"[__import__('os').getcwd()]\"\n")
    with pytest.raises(InputError, match="not a JSON array or a Python list") as info:
        list(load_cases(path)[1])
    assert (info.value.line, info.value.field) == (2, "retrieved_ids")


def test_a_field_given_twice_with_different_values_is_refused():
    with pytest.raises(InputError, match="given twice, as 'question' and as 'input'") as info:
        evaluate([{"question": "a?", "input": "b?"}], ["contextual-relevancy"], cache=False)
    assert info.value.field == "input" and "case 0" in str(info.value)
    given = {"question": "a?", "input": "a?", "contexts": ["c"]}
    same = evaluate([given], ["contextual-relevancy"], cache=False, progress=False)
    assert next(iter(same.cases().values())).case.input == "a?"


# --------------------------------------------------------------------------- to_pandas


def test_to_pandas_gives_each_items_status_long_and_wide():
    data = rows(4)
    data[2]["contexts"] = []  # faithfulness does not apply: no retrieved context
    run = evaluate(
        pd.DataFrame(data), METRICS, cache=False, progress=False, thresholds={"retrieval": 0.99}
    )
    long = run.to_pandas()
    assert list(long.columns[:4]) == ["case_id", "metric", "score", "status"]
    status = {(r.case_id, r.metric): r.status for r in long.itertuples()}
    assert status[("c02", "faithfulness")] == "not applicable"
    assert {status[(c, "retrieval")] for c in ("c00", "c01", "c02", "c03")} == {"pass", "below"}
    wide = run.to_pandas(wide=True)
    assert list(wide["case_id"]) == ["c00", "c01", "c02", "c03"]
    metric_columns = [
        "retrieval.score",
        "retrieval.status",
        "faithfulness.score",
        "faithfulness.status",
    ]
    assert list(wide.columns[-4:]) == metric_columns
    assert list(wide.columns[1:3]) == ["input", "actual_output"]  # the case's columns first
    assert list(wide.columns[-7:-4]) == ["meta.reviewed", "meta.team", "meta.topic"]
    for item in long.itertuples():
        row = wide.set_index("case_id").loc[item.case_id]
        assert row[f"{item.metric}.status"] == item.status
        assert row[f"{item.metric}.score"] == pytest.approx(item.score, nan_ok=True)
    assert wide.loc[2, "faithfulness.score"] != wide.loc[2, "faithfulness.score"]  # NaN: no score
