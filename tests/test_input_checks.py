"""Input checks: encodings, the whole-file check before the first judge call, duplicate ids,
unknown columns, the fields each metric requires, and nulls."""

import json
import tracemalloc
from pathlib import Path

import pytest

from contextlens import InputError
from contextlens.calibration import read_labelled
from contextlens.loaders import check_cases, load_cases
from contextlens.metrics import registry
from contextlens.metrics.context import ContextAwareness
from contextlens.metrics.context_precision import ContextPrecisionScorer
from contextlens.metrics.context_similarity import ContextSimilarityScorer
from contextlens.metrics.contextual_relevancy import ContextualRelevancyScorer
from contextlens.retriever import JsonlRetriever
from contextlens.runner import evaluate
from contextlens.schemas import Dataset, MetricResult, ModelTestCase
from contextlens.testing import FakeOpenAIServer

BOM = b"\xef\xbb\xbf"


def case(i, **extra):
    row = {
        "id": f"c{i}",
        "input": f"When do you open on day {i}?",
        "actual_output": "At 9am.",
        "expected_output": "9am to 5pm.",
        "retrieval_context": ["The shop opens at 9am and closes at 5pm."],
    }
    row.update(extra)
    return {k: v for k, v in row.items() if v is not ...}


def session(sid, **extra):
    return {
        "session_id": sid,
        "assistant_id": "bot",
        "context": "Open 9-5.",
        "conversation": [{"qa_id": "q1", "query": "hours?", "assistant": "9-5"}],
        **extra,
    }


def jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def judge(server):
    return f"{server.base_url}#m"


def cases_of(path):
    return list(load_cases(path)[1])


def raised(path):
    with pytest.raises(InputError) as info:
        cases_of(path)
    return info.value


# --------------------------------------------------------------------------- encodings


def test_bom_jsonl_cases_are_read(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(BOM + jsonl([case(1), case(2)]).encode())
    assert [c.name for c in cases_of(path)] == ["c1", "c2"]


def test_bom_csv_keeps_the_first_column(tmp_path):
    path = tmp_path / "c.csv"
    path.write_bytes(BOM + b"id,input,actual_output\nc1,q?,a.\n")
    [only] = cases_of(path)
    assert only.name == "c1" and only.input == "q?"


def test_bom_csv_session_rows_are_sessions(tmp_path):
    path = tmp_path / "s.csv"
    path.write_bytes(
        BOM + b"session_id,assistant_id,context,qa_id,query,assistant\ns1,bot,c,q1,hi?,hello\n"
    )
    kind, cases = load_cases(path)
    assert kind == "sessions" and [s.session_id for s in cases] == ["s1"]


def test_bom_jsonl_retriever_and_labelled_files(tmp_path):
    sessions = tmp_path / "s.jsonl"
    sessions.write_bytes(BOM + jsonl([session("a"), session("b")]).encode())
    assert [s.session_id for s in JsonlRetriever(sessions).load_dataset()] == ["a", "b"]
    labelled = tmp_path / "l.csv"
    labelled.write_bytes(BOM + b"label,id,input\n1,x,q?\n0,y,r?\n")
    rows = read_labelled(labelled)
    assert [(r.id, r.label) for r in rows] == [("x", 1.0), ("y", 0.0)]


def _latin1_at(line, suffix):
    """A file whose line ``line`` holds the Latin-1 byte 0xe9 (``caf\\xe9``)."""
    if suffix == ".csv":
        head = "id,input,actual_output\n" + "".join(f"c{i},q{i}?,a.\n" for i in range(line - 2))
        return head.encode() + b"cx,caf\xe9?,a.\n"
    good = jsonl([case(i) for i in range(line - 1)]).encode()
    return good + json.dumps(case(99, input="cafe?")).encode().replace(b"cafe", b"caf\xe9") + b"\n"


@pytest.mark.parametrize("line", [3, 2_000])
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_bytes_that_are_not_utf8_name_file_and_line(tmp_path, suffix, line):
    path = tmp_path / f"c{suffix}"
    path.write_bytes(_latin1_at(line, suffix))
    error = raised(path)
    assert (error.file, error.line) == (str(path), line)
    assert "not UTF-8" in str(error) and "0xe9" in str(error)


def test_bytes_that_are_not_utf8_in_retriever_and_labelled_files(tmp_path):
    sessions = tmp_path / "s.jsonl"
    bad = json.dumps(session("b")).encode().replace(b"Open", b"Op\xe9n")
    sessions.write_bytes(jsonl([session("a")]).encode() + bad + b"\n")
    with pytest.raises(InputError) as info:
        list(JsonlRetriever(sessions).load_dataset())
    assert (info.value.file, info.value.line) == (str(sessions), 2)
    labelled = tmp_path / "l.csv"
    labelled.write_bytes(b"label,id,input\n1,x,q?\n0,y,caf\xe9?\n")
    with pytest.raises(InputError) as info:
        read_labelled(labelled)
    assert (info.value.file, info.value.line) == (str(labelled), 3)


# --------------------------------------------------------------------------- the whole file first

BAD_LINES = {
    "malformed JSON": ('{"id": "c1000", "input": ', "malformed JSON"),
    "missing answer": (
        json.dumps(case(1000, actual_output=...)),
        "field 'actual_output': metric 'context-precision' requires 'actual_output', which is "
        "missing",
    ),
    "null answer": (
        json.dumps(case(1000, actual_output=None)),
        "field 'actual_output': metric 'context-precision' requires 'actual_output', which is "
        "missing",
    ),
    "duplicate id": (json.dumps(case(2)), "field 'id': duplicate id 'c2' (also on line 3)"),
    "unknown column": (
        json.dumps(case(1000, retreival_context=["x"])),
        "field 'retreival_context': unknown column; did you mean 'retrieval_context'?",
    ),
    "required by the metric": (
        json.dumps(case(1000, expected_output=..., retrieval_context=...)),
        "field 'expected_output': metric 'context-precision' requires one of 'expected_output', "
        "'retrieval_context', 'context'; none is given",
    ),
}


@pytest.mark.parametrize("problem", list(BAD_LINES))
def test_run_checks_the_whole_file_before_the_first_judge_call(run_cli, tmp_path, problem):
    bad, message = BAD_LINES[problem]
    path = tmp_path / "cases.jsonl"
    path.write_text(jsonl([case(i) for i in range(1_000)]) + bad + "\n")
    with FakeOpenAIServer() as server:
        code, text = run_cli(
            "run", path, "-m", "context-precision", "--judge", judge(server), "--out",
            tmp_path / "out", "-q", "--no-store", "--cache", "off",
        )  # fmt: skip
        assert server.calls == 0
    assert code == 2, text
    assert f"cases.jsonl:1001: {message}" in " ".join(text.split())
    assert not list(tmp_path.rglob("results.jsonl"))


def test_check_cases_counts_and_keeps_only_ids(tmp_path):
    path = tmp_path / "c.jsonl"
    long = "The shop opens at 9am and closes at 5pm. " * 50  # 2 kB per case
    path.write_text(jsonl([case(i, retrieval_context=[long]) for i in range(2_000)]))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        found = check_cases(path, [("context-precision", ContextPrecisionScorer())])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == ("test_cases", 2_000)
    assert peak < size / 5, (peak, size)


# --------------------------------------------------------------------------- duplicates


def test_duplicate_case_ids_name_both_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    rows = [case(1), case(2), {**case(3, id=...), "name": "c1"}]
    path.write_text(jsonl(rows))
    error = raised(path)
    assert (error.line, error.field) == (3, "name")
    assert "duplicate id 'c1' (also on line 1)" in str(error)
    csv = tmp_path / "c.csv"
    csv.write_text("id,input\na,q?\nb,r?\na,s?\n")
    error = raised(csv)
    assert error.line == 4 and "also on line 2" in str(error)


def test_duplicate_session_ids_name_both_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl([session("a"), session("b"), session("a")]))
    error = raised(path)
    assert (error.line, error.field) == (3, "session_id")
    assert "duplicate session_id 'a' (also on line 1)" in str(error)


def test_session_rows_need_not_be_contiguous_but_qa_ids_are_unique(tmp_path):
    row = {
        "session_id": "s1",
        "assistant_id": "bot",
        "context": "c",
        "query": "q",
        "assistant": "a",
    }
    rows = [{**row, "qa_id": "q1"}, {**row, "session_id": "s2", "qa_id": "q1"}]
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl([*rows, {**row, "qa_id": "q2"}]))
    assert [len(s.conversation) for s in cases_of(path)] == [2, 1]
    path.write_text(jsonl([*rows, {**row, "qa_id": "q1"}]))
    error = raised(path)
    assert (error.line, error.field) == (3, "qa_id")
    assert "duplicate qa_id 'q1' in session 's1' (also on line 1)" in str(error)


def test_evaluate_refuses_duplicate_ids_in_a_list_before_the_first_judge_call():
    cases = [ModelTestCase(**case(i, id=...), name=f"c{i}") for i in range(40)]
    cases.append(ModelTestCase(input="again", actual_output="x", name="c3"))
    with FakeOpenAIServer() as server:
        with pytest.raises(InputError, match="case 40: duplicate id 'c3' \\(also case 3\\)"):
            evaluate(cases, ["context-precision"], judge=judge(server), cache=False)
        assert server.calls == 0
    sessions = [Dataset(**session("a")), Dataset(**session("a"))]
    with pytest.raises(InputError, match="case 1: duplicate session_id 'a'"):
        evaluate(sessions, ["context"], cache=False)


def test_evaluate_checks_an_iterator_as_it_is_consumed(tmp_path):
    def stream():
        for i in range(5):
            yield ModelTestCase(**case(i, id=...), name=f"c{i}")
        yield ModelTestCase(input="again", actual_output="x", expected_output="y", name="c2")

    with pytest.raises(InputError, match="case 5: duplicate id 'c2'"):
        evaluate(stream(), ["context-precision"], cache=False, out=tmp_path)
    [results] = tmp_path.rglob("results.jsonl")
    lines = results.read_text().splitlines()
    assert sorted(json.loads(x)["case_id"] for x in lines) == [f"c{i}" for i in range(5)]


# --------------------------------------------------------------------------- columns


def test_an_unknown_column_says_did_you_mean(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(jsonl([case(1), case(2, retreival_context=["x"])]))
    error = raised(path)
    assert (error.file, error.line, error.field) == (str(path), 2, "retreival_context")
    assert "did you mean 'retrieval_context'?" in str(error)
    csv = tmp_path / "c.csv"
    csv.write_text("id,Input,actual_output\nc1,q?,a.\n")
    error = raised(csv)
    assert (error.line, error.field) == (1, "Input") and "did you mean 'input'?" in str(error)


def test_unknown_keys_of_sessions_say_did_you_mean(tmp_path):
    path = tmp_path / "s.jsonl"
    bad = session("b")
    bad["conversation"][0]["qeury"] = bad["conversation"][0].pop("query")
    path.write_text(jsonl([session("a"), bad]))
    error = raised(path)
    assert (error.line, error.field) == (2, "conversation[0].qeury")
    assert "did you mean 'query'?" in str(error)
    path.write_text(jsonl([session("a", assistant_name="x")]))
    assert raised(path).field == "assistant_name"
    rows = tmp_path / "s.csv"
    rows.write_text("session_id,assistant_id,context,qa_id,query,asistant\ns1,bot,c,q1,hi?,yo\n")
    error = raised(rows)
    assert (error.line, error.field) == (1, "asistant") and "did you mean 'assistant'?" in str(
        error
    )


def test_aliases_and_a_pandas_index_column_stay_accepted(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text(',question,answer,contexts\n0,q?,a.,"[""x""]"\n')
    [only] = cases_of(path)
    assert (only.input, only.actual_output, only.retrieval_context) == ("q?", "a.", ["x"])


def test_meta_columns_are_kept_in_the_case(tmp_path):
    path = tmp_path / "c.jsonl"
    row = case(1, meta={"team": "a"}, **{"meta.domain": "billing", "meta_source": "web"})
    path.write_text(jsonl([row]))
    [only] = cases_of(path)
    assert only.meta == {"team": "a", "domain": "billing", "source": "web"}
    csv = tmp_path / "c.csv"
    csv.write_text('id,input,meta,meta.domain\nc1,q?,"{""team"": ""a""}",billing\n')
    [only] = cases_of(csv)
    assert only.meta == {"team": "a", "domain": "billing"}
    csv.write_text("id,input,meta\nc1,q?,team a\n")
    error = raised(csv)
    assert error.field == "meta" and "expected a JSON object" in str(error)


def test_meta_of_sessions_and_interactions(tmp_path):
    path = tmp_path / "s.jsonl"
    obj = session("a", meta={"channel": "chat"})
    obj["conversation"][0]["meta"] = {"topic": "hours"}
    path.write_text(jsonl([obj]))
    [only] = cases_of(path)
    assert only.meta == {"channel": "chat"} and only.conversation[0].meta == {"topic": "hours"}
    rows = tmp_path / "s.csv"
    rows.write_text(
        "session_id,assistant_id,context,qa_id,query,assistant,meta.topic\ns1,b,c,q1,hi?,yo,hours\n"
    )
    [only] = cases_of(rows)
    assert only.conversation[0].meta == {"topic": "hours"}


def test_results_carry_no_case_metadata(tmp_path):
    cases = [ModelTestCase(**case(1, id=...), name="c1", meta={"secret": "s3cr3t"})]
    run = evaluate(cases, ["context-precision"], cache=False, out=tmp_path)
    [line] = (Path(run.out_dir) / "results.jsonl").read_text().splitlines()
    assert "meta" not in json.loads(line) and "s3cr3t" not in line


# --------------------------------------------------------------------------- what metrics require


def test_each_builtin_metric_declares_what_it_requires():
    expected = {
        "context": ("session_id", "assistant_id", "context", "conversation"),
        "context-precision": ("actual_output", ("expected_output", "retrieval_context", "context")),
        "contextual-relevancy": ("input", "retrieval_context"),
        "context-similarity": ("input", "actual_output", "retrieval_context"),
    }
    classes = {
        "context": ContextAwareness,
        "context-precision": ContextPrecisionScorer,
        "contextual-relevancy": ContextualRelevancyScorer,
        "context-similarity": ContextSimilarityScorer,
    }
    for name, requires in expected.items():
        assert registry.get(name).requires == requires
        assert classes[name].requires == requires


def test_the_decorator_sets_requires_and_checks_it():
    @registry.metric("toy-requires", requires=("expected_output", ["context", "input"]))
    class Toy:
        """A toy."""

        case_type = ModelTestCase

    try:
        assert Toy.requires == ("expected_output", ("context", "input"))
        assert registry.get("toy-requires").requires == Toy.requires
    finally:
        registry.unregister("toy-requires")
    with pytest.raises(TypeError, match="requires"):
        registry.metric("toy-bad", requires=(3,))(Toy)


def test_evaluate_refuses_a_case_missing_a_required_field_before_the_first_judge_call():
    cases = [ModelTestCase(**case(i, id=...), name=f"c{i}") for i in range(30)]
    cases.append(ModelTestCase(input="q?", actual_output="a.", name="no-context"))
    with FakeOpenAIServer() as server:
        with pytest.raises(InputError) as info:
            evaluate(cases, ["contextual-relevancy"], judge=judge(server), cache=False)
        assert server.calls == 0
    assert info.value.field == "retrieval_context"
    assert "case 30" in str(info.value) and "'contextual-relevancy'" in str(info.value)


class NeedsReference:
    """A metric object that declares ``requires`` itself."""

    name = "needs_reference"
    case_type = ModelTestCase
    uses_judge = False
    requires = ("expected_output",)

    async def score(self, case, services):
        return MetricResult(metric=self.name, score=1.0)


def test_a_metric_objects_requires_is_read():
    good = ModelTestCase(input="q", expected_output="r")
    run = evaluate([good], [NeedsReference()], cache=False)
    assert run.summaries["needs_reference"].n_scored == 1
    with pytest.raises(InputError, match="case 1: metric 'needs_reference' requires") as info:
        evaluate([good, ModelTestCase(input="q", expected_output="  ")], [NeedsReference()])
    assert info.value.field == "expected_output"


def test_schema_shows_what_each_metric_requires(run_cli):
    code, text = run_cli("schema")
    assert code == 0 and "requires" in text
    # context-precision needs one of three fields (the cell wraps as the table's width allows)
    assert "one of" in text and "retrieval_context, context)" in text


# --------------------------------------------------------------------------- nulls


def test_null_is_reported_as_null(tmp_path):
    path = tmp_path / "c.jsonl"
    obj = session("a")
    obj["conversation"][0]["assistant"] = None
    path.write_text(jsonl([obj]))
    assert "field 'conversation[0].assistant': null is not allowed (expected text)" in str(
        raised(path)
    )
    row = {"session_id": "s", "assistant_id": "b", "context": "c", "qa_id": "q", "query": "q"}
    path.write_text(jsonl([{**row, "assistant": None}]))
    assert "c.jsonl:1: field 'assistant': null is not allowed (expected text)" in str(raised(path))
    path.write_text(jsonl([{**row, "assistant_id": None, "assistant": "a"}]))
    assert "c.jsonl:1: field 'assistant_id': null is not allowed" in str(raised(path))


def test_a_question_null_or_empty_is_refused_only_by_a_metric_that_requires_it(tmp_path):
    """A summary has no question: only a metric that requires ``input`` refuses it."""
    path = tmp_path / "c.jsonl"
    path.write_text(jsonl([case(1, input=None), case(2, input=...)]))
    assert [c.input for c in cases_of(path)] == ["", ""]
    csv = tmp_path / "c.csv"
    csv.write_text("id,input,actual_output\nc1,,a\n")
    assert [c.input for c in cases_of(csv)] == [""]
    with pytest.raises(InputError) as info:
        check_cases(csv, [("context-similarity", ContextSimilarityScorer())])
    assert (info.value.file, info.value.line, info.value.field) == (str(csv), 2, "input")
    assert "requires 'input', which is empty" in str(info.value)
    with pytest.raises(InputError, match="requires 'input', which is empty"):
        evaluate([{"input": None}], ["context-similarity"], cache=False)
    obj = session("a")
    obj["conversation"][0]["query"] = None
    path.write_text(jsonl([obj]))
    assert cases_of(path)[0].conversation[0].query == ""
