"""The contracts between the layers: one name per metric, one field table, one run
configuration, typed seams. Each test is something a user met: a gate on the wrong metric,
calibrate scoring other rows than run, a setting that leaked into the next run, a typo that
silently dropped the retrieved chunks."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from contextlens import (
    ContextPrecision,
    MetricResult,
    ModelTestCase,
    calibrate,
    evaluate,
    metric,
)
from contextlens.metrics import registry
from contextlens.metrics.base import Services
from contextlens.metrics.context_precision import ContextPrecisionScorer
from contextlens.pytest_plugin import assert_context
from contextlens.results import RecordedConfig
from contextlens.runner import RunConfig
from contextlens.testing import FakeOpenAIServer
from support.relevancy import all_relevant

SRC = Path(__file__).parents[1] / "src" / "contextlens"


def verdict(request: dict) -> str:
    """A valid reply to whichever metric's prompt this is: every statement relevant."""
    prompt = request["messages"][-1]["content"]
    if "Chunk 1:" in prompt:
        return json.dumps(all_relevant(prompt))
    return json.dumps({"reason": "Follows.", "score": 0.7})


ROWS = [
    {
        "id": f"r{i}",
        "input": "When does the shop open?",
        "actual_output": "It opens at nine." if i % 2 else "It is closed on Sundays.",
        "expected_output": "At 9 am, Monday to Saturday.",
        "retrieval_context": ["The shop opens at 9 am.", "It is closed on Sundays."],
    }
    for i in range(4)
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- one name per metric --------------------------------------------------------------------


def test_a_gate_naming_a_metric_the_run_does_not_measure_is_refused_before_any_call(
    run_cli, tmp_path
):
    cases = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    with FakeOpenAIServer(reply=verdict) as server:
        judge = f"{server.base_url}#judge"
        base = ["run", cases, "-m", "contextual-relevancy", "-m", "context-precision"]
        base += ["--judge", judge, "--out", tmp_path / "out", "-q", "--no-store"]
        code, text = run_cli(*base, "--fail-under", "context=0.7")
        assert code == 2 and "'context'" in text and "does not measure" in text
        assert "contextual-relevancy, context-precision" in text
        code, text = run_cli(*base, "--fail-under", "context-precison=0.7")
        assert code == 2 and "did you mean 'context-precision'" in text
        code, text = run_cli(*base, "--fail-under", "context-precision=80")
        assert code == 2 and "expected a value in [0, 1]" in text and "'80'" in text
        code, text = run_cli(*base, "--fail-under", "context-precision=nan")
        assert code == 2 and "expected a value in [0, 1]" in text
        assert server.calls == 0  # nothing paid for
        assert "Traceback" not in text
        # a seed name of the metric it gates on is the same metric
        code, text = run_cli(*base, "--fail-under", "ContextPrecision=0.9")
        assert code == 1 and "context-precision: mean 0.700 < 0.9" in text
        assert server.calls > 0


def test_a_new_metric_is_one_module_and_keeps_its_name_everywhere(run_cli, tmp_path):
    """A metric that needs a field none of the four require (the expected output): it
    registers, and run, calibrate, schema, evaluate and pytest all know it by its name."""

    @metric(
        "answer-overlap",
        reads=("actual_output", "expected_output"),
        requires=("actual_output", "expected_output"),
    )
    class AnswerOverlap:
        """Share of the expected answer's words the answer repeats."""

        case_type = ModelTestCase

        def __init__(self, name: str = "answer_overlap") -> None:
            self.name = name  # a name of its own is not its key: the registered one is

        async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
            want = set((case.expected_output or "").lower().split())
            got = set((case.actual_output or "").lower().split())
            share = len(want & got) / len(want) if want else 0.0
            return MetricResult(metric=self.name, score=share, reason=f"{share:.0%} repeated")

    try:
        cases = write_jsonl(tmp_path / "cases.jsonl", ROWS)
        out = tmp_path / "out"
        code, text = run_cli("run", cases, "-m", "answer-overlap", "--out", out, "-q")
        assert code == 0, text
        summary = json.loads((out / "latest" / "summary.json").read_text())
        assert list(summary["summaries"]) == ["answer-overlap"]
        lines = (out / "latest" / "results.jsonl").read_text().splitlines()
        assert {json.loads(line)["metric"] for line in lines} == {"answer-overlap"}
        page = (out / "latest" / "report.html").read_text()
        assert 'data-metric="answer-overlap"' in page and "answer_overlap" not in page
        run = evaluate([ModelTestCase(**r) for r in ROWS], [AnswerOverlap()], progress=False)
        assert list(run.summaries) == ["answer-overlap"]
        assert run.summary("answer_overlap") is run.summaries["answer-overlap"]
        with pytest.raises(AssertionError, match=r"answer-overlap: score 0\.\d+ is below"):
            assert_context(
                ModelTestCase(**ROWS[0]), [AnswerOverlap()], thresholds={"answer-overlap": 1.0}
            )
        labelled = write_jsonl(
            tmp_path / "labelled.jsonl", [{**r, "label": i % 2} for i, r in enumerate(ROWS)]
        )
        code, text = run_cli("calibrate", labelled, "-m", "answer-overlap", "--out", tmp_path)
        assert code == 0 and "answer-overlap vs human labels" in text, text
        code, text = run_cli("schema")
        schema_rows = [line for line in text.splitlines() if "answer-overlap" in line]
        assert any("actual_output, expected_output" in line for line in schema_rows), text
        no_reference = write_jsonl(tmp_path / "bare.jsonl", [{"input": "q", "answer": "a"}])
        code, text = run_cli("run", no_reference, "-m", "answer-overlap", "--no-store", "-q")
        assert code == 2 and "requires 'expected_output'" in text
    finally:
        registry.unregister("answer-overlap")


def test_two_instances_of_one_metric_run_side_by_side_by_their_labels():
    cases = [ModelTestCase(**r) for r in ROWS]
    with pytest.raises(ValueError, match=r"go by 'context-precision'.*label"):
        evaluate(cases, [ContextPrecisionScorer(), ContextPrecisionScorer()], progress=False)
    with FakeOpenAIServer(reply=verdict) as server:
        judged = ContextPrecisionScorer(judge=f"{server.base_url}#j", label="judged")
        plain = ContextPrecisionScorer(few_shot_examples=[], label="no-examples")
        run = evaluate(cases, [judged, plain, ContextPrecision(name="opik")], progress=False)
    assert list(run.summaries) == [
        "context-precision:judged",
        "context-precision:no-examples",
        "context-precision:opik",
    ]
    assert run.summaries["context-precision:judged"].mean == pytest.approx(0.7)
    assert run.summaries["context-precision:judged"].judge == "openai-compat:j"
    assert run.summaries["context-precision:no-examples"].judge == "offline"
    assert {r.metric.label for r in run.results} == {"judged", "no-examples", "opik"}
    with pytest.raises(LookupError, match=r"ambiguous.*context-precision:judged"):
        run.summary("context-precision")
    assert run.summary("context-precision:opik").n == 4


def test_seed_names_resolve_to_the_registered_name_and_nothing_else_does():
    for name in ("context_precision_metric", "ContextPrecision", "context_precision"):
        assert registry.resolve(name).name == "context-precision"
    assert registry.resolve("Contextual Relevancy").name == "contextual-relevancy"
    assert registry.resolve("ContextSimilarityEvaluator").name == "context-similarity"
    with pytest.raises(registry.UnknownMetricError, match="did you mean 'context-precision'"):
        registry.resolve("context-precison")
    with pytest.raises(registry.UnknownMetricError):
        registry.resolve("contextual")  # never a prefix match
    with pytest.raises(ValueError, match="names 'context-precision' already"):
        metric("cp", aliases=("ContextPrecision",), case_type=ModelTestCase)(type("X", (), {}))


# --- one field table ------------------------------------------------------------------------


def test_python_cases_refuse_what_the_loader_refuses_with_the_same_hint(run_cli, tmp_path):
    hint = r"(?s)retreival_context.*did you mean 'retrieval_context'"
    with pytest.raises(ValueError, match=hint):
        ModelTestCase(input="q", retreival_context=["chunk"])
    cases = write_jsonl(tmp_path / "typo.jsonl", [{"input": "q", "retreival_context": ["c"]}])
    code, text = run_cli("run", cases, "-m", "contextual-relevancy", "--no-store", "-q")
    assert code == 2 and "did you mean 'retrieval_context'" in text
    # Ragas's names are the fields they mean
    ragas = ModelTestCase(
        user_input="q", retrieved_contexts=["c"], response="a", reference="r", id="x"
    )
    assert (ragas.input, ragas.retrieval_context, ragas.actual_output) == ("q", ["c"], "a")
    assert (ragas.expected_output, ragas.name) == ("r", "x")
    with pytest.raises(ValueError, match="given twice"):
        ModelTestCase(input="q", question="q2")


def test_calibrate_scores_each_row_as_run_scores_it(tmp_path, run_cli):
    """For every metric, the score calibrate gives a labelled row is the one run gives the
    same row: context precision sees the expected output and the context."""
    cases = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    labelled = write_jsonl(
        tmp_path / "labelled.jsonl", [{**r, "label": i % 2} for i, r in enumerate(ROWS)]
    )
    for name in ("context-precision", "contextual-relevancy", "context-similarity"):
        out = tmp_path / name
        code, text = run_cli("run", cases, "-m", name, "--out", out, "-q", "--no-store")
        assert code == 0, text
        ran = {
            json.loads(line)["case_id"]: json.loads(line)["score"]
            for line in (out / "latest" / "results.jsonl").read_text().splitlines()
        }
        report = calibrate(labelled, name, progress=False)
        assert {i.id: i.score for i in report.items} == ran, name
        assert report.metric == name
    with_reference = calibrate(labelled, "context-precision", progress=False)
    without = calibrate(
        [{k: v for k, v in r.items() if k != "expected_output"} | {"label": 1} for r in ROWS],
        "context-precision",
        progress=False,
    )
    assert [i.score for i in with_reference.items] != [i.score for i in without.items]


def test_calibrate_runs_a_local_server_as_evaluate_does(tmp_path):
    """A server on this machine is asked as many calls at once as it reports slots, through
    calibrate as through evaluate."""
    labelled = [{**r, "label": i % 2} for i, r in enumerate(ROWS * 3)]
    labelled = [{**r, "id": f"{r['id']}-{i}"} for i, r in enumerate(labelled)]
    peaks = {}
    for how in ("evaluate", "calibrate"):
        with FakeOpenAIServer(reply=verdict, latency=0.05, slots=2) as server:
            judge = f"{server.base_url}#judge"
            if how == "evaluate":
                cases = [
                    ModelTestCase(**{k: v for k, v in r.items() if k != "label"}) for r in labelled
                ]
                evaluate(cases, ["context-precision"], judge=judge, cache=False, progress=False)
            else:
                calibrate(labelled, "context-precision", judge=judge, cache=False, progress=False)
            peaks[how] = server.peak_in_flight
            assert server.calls == len(labelled)
    assert peaks == {"evaluate": 2, "calibrate": 2}


# --- one run configuration ------------------------------------------------------------------


def test_the_run_configuration_is_built_once_and_recorded(tmp_path, run_cli):
    with pytest.raises(TypeError, match="did you mean 'max_concurrency'"):
        evaluate([], ["context"], max_concurency=4)
    with pytest.raises(ValueError, match="repeats"):
        RunConfig.of(repeats=0)
    with pytest.raises(ValueError, match="unknown setting 'bogus'"):
        RunConfig(judge="openai:gpt-4o-mini?bogus=1")
    config = RunConfig(judge="http://127.0.0.1:9/v1#m?timeout=30", max_concurrency=3)
    assert config.judge.kind == "http" and config.judge.settings.timeout == 30
    described = config.describe()
    assert described.judge == "http://127.0.0.1:9/v1#m?timeout=30.0"
    assert described.max_concurrency == 3
    cases = write_jsonl(tmp_path / "cases.jsonl", ROWS)
    store = tmp_path / "runs.sqlite3"
    out = tmp_path / "out"
    code, text = run_cli(
        "run", cases, "-m", "context-similarity", "--concurrency", "5", "--out", out,
        "--store", store, "-q",
    )  # fmt: skip
    assert code == 0, text
    summary = json.loads((out / "latest" / "summary.json").read_text())
    assert summary["config"]["max_concurrency"] == 5 and summary["config"]["judge"] == "offline"
    from contextlens.store import RunStore

    [info] = RunStore(store).list_runs()
    recorded = RunStore(store).load(info.run_id)
    assert recorded.config.max_concurrency == 5
    assert recorded.config.model_extra == {"data": str(cases), "metrics": ["context-similarity"]}
    logged = RecordedConfig.model_validate(summary["config"])  # summary.json, typed
    assert logged.model_dump() == {
        k: v for k, v in recorded.config.model_dump().items() if k not in ("data", "metrics")
    }


def test_the_run_options_are_the_configuration_fields():
    from contextlens.runner import RunOptions

    assert set(RunOptions.__annotations__) == set(RunConfig.model_fields)


# --- typed seams ----------------------------------------------------------------------------


def test_the_ray_executor_uses_only_the_public_seams_of_the_run_package():
    sources = [p.read_text() for p in (SRC / "scale" / "ray").glob("*.py")]
    private = [
        (node.module, alias.name)
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("contextlens.")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []
    assert not any("type: ignore[assignment]" in source for source in sources)


def test_backends_register_by_name_and_settings_are_typed():
    from contextlens.judges.spec import JudgeSpec, is_spec, kinds

    assert {"openai", "http", "litellm", "llama"} <= set(kinds())
    spec = JudgeSpec.parse("http://127.0.0.1:8080/v1#m?timeout=20&concurrency=2&structured=off")
    assert (spec.kind, spec.target) == ("http", "http://127.0.0.1:8080/v1#m")
    assert (spec.settings.timeout, spec.settings.concurrency) == (20.0, 2)
    assert spec.settings.structured_output == "off"
    assert JudgeSpec.parse(str(spec)) == spec
    assert is_spec("gpt-4o") and is_spec("offline") and not is_spec("my_module:make_model")
    with pytest.raises(ValueError, match="max_tokens='0'"):
        JudgeSpec.parse("openai:gpt-4o-mini?max_tokens=0")
    cli_source = "".join(p.read_text() for p in (SRC / "cli").glob("*.py"))
    assert '"openai:"' not in cli_source and '"http://"' not in cli_source


def test_each_metrics_details_are_its_own_typed_model():
    from contextlens.metrics.context import ContextDetails
    from contextlens.metrics.context_precision import PrecisionDetails
    from contextlens.metrics.context_similarity import SimilarityDetails
    from contextlens.metrics.contextual_relevancy import RelevancyDetails
    from contextlens.results import ItemResult

    expected = {
        "context": ContextDetails,
        "context-precision": PrecisionDetails,
        "contextual-relevancy": RelevancyDetails,
        "context-similarity": SimilarityDetails,
    }
    assert {n: registry.get(n).details for n in expected} == expected
    run = evaluate(
        [ModelTestCase(**r) for r in ROWS[:1]],
        ["context-precision", "contextual-relevancy", "context-similarity"],
        progress=False,
    )
    for item in run.results:
        assert type(item.details) is expected[item.metric]
        again = ItemResult.model_validate_json(item.model_dump_json())
        assert again.details == item.details and type(again.details) is expected[item.metric]
