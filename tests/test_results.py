"""What a run gives back: its results whether or not it wrote a folder, its cases, a
DataFrame with the cases' fields and meta, how a notebook shows it, the data fingerprint."""

from __future__ import annotations

import json

import pytest

from contextlens.cases import DataFingerprint
from contextlens.metrics.settings import settings_of
from contextlens.results import EvalRun
from contextlens.runner import evaluate
from contextlens.schemas import Batch, Dataset, ModelTestCase

CASES = [
    ModelTestCase(
        input="When do you open?",
        actual_output="At 9 am.",
        expected_output="9 am.",
        retrieval_context=["We open at 9 am.", "Parking is free."],
        name=f"c{i}",
        meta={"domain": "hours" if i % 2 else "parking", "rank": i},
    )
    for i in range(4)
]


def _run(**options):
    return evaluate(CASES, ["context-similarity"], cache=False, progress=False, **options)


def test_results_and_cases_are_reachable_with_or_without_a_folder(tmp_path):
    held = _run()
    written = _run(out=tmp_path)
    for run in (held, written):
        assert len(run.results) == 4 and sorted(r.case_id for r in run.results) == [
            "c0",
            "c1",
            "c2",
            "c3",
        ]
        assert run.results[0].metric == "context-similarity"
        assert sorted(run.cases()) == ["c0", "c1", "c2", "c3"]
        assert run.cases()["c3"].case.meta == {"domain": "hours", "rank": 3}
    lines = (tmp_path / written.run_id / "cases.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["case_id"] for x in lines) == ["c0", "c1", "c2", "c3"]
    again = EvalRun.from_folder(tmp_path / written.run_id)
    assert sorted((r.case_id, r.score) for r in again.results) == sorted(
        (r.case_id, r.score) for r in written.results
    )
    assert again.data_fingerprint == written.data_fingerprint == held.data_fingerprint
    # summary.json keeps its shape: accounting objects, {} for a metric that made no call
    data = json.loads((tmp_path / written.run_id / "summary.json").read_text())
    assert data["summaries"]["context-similarity"]["accounting"] == {}
    assert data["accounting"]["total"]["calls"] == 0 and data["accounting"]["entries"] == []
    assert again.summaries["context-similarity"].accounting is None


def test_the_data_fingerprint_does_not_depend_on_order_but_on_content():
    forward = _run().data_fingerprint
    backward = evaluate(
        list(reversed(CASES)), ["context-similarity"], cache=False, progress=False
    ).data_fingerprint
    assert forward == backward
    changed = [CASES[0].model_copy(update={"actual_output": "At 10 am."}), *CASES[1:]]
    other = evaluate(changed, ["context-similarity"], cache=False, progress=False)
    assert other.data_fingerprint != forward
    empty = DataFingerprint()
    assert empty.hexdigest() is None


def test_to_pandas_has_the_case_fields_and_meta_columns():
    pytest.importorskip("pandas")
    frame = _run().to_pandas()
    assert list(frame.columns[:2]) == ["case_id", "metric"]
    assert {"input", "actual_output", "expected_output", "retrieval_context"} <= set(frame.columns)
    assert list(frame.columns[-2:]) == ["meta.domain", "meta.rank"]
    row = frame.set_index("case_id").loc["c1"]
    assert row["meta.domain"] == "hours" and row["meta.rank"] == 1
    assert row["retrieval_context"] == ["We open at 9 am.", "Parking is free."]


def test_a_session_gets_its_own_columns():
    pytest.importorskip("pandas")
    session = Dataset(
        session_id="s1",
        assistant_id="bot",
        context="Open 9 am.",
        conversation=[Batch(qa_id="q1", query="When?", assistant="At 9 am.")],
        meta={"channel": "chat"},
    )
    frame = evaluate([session], ["context"], cache=False, progress=False).to_pandas()
    assert frame.loc[0, "assistant_id"] == "bot" and frame.loc[0, "turns"] == 1
    assert frame.loc[0, "meta.channel"] == "chat"


def test_a_notebook_shows_the_summary_table_escaped(tmp_path):
    run = _run(out=tmp_path, name="<b>nightly</b>")
    html = run._repr_html_()
    assert "<table>" in html and "context-similarity" in html
    assert "&lt;b&gt;nightly&lt;/b&gt;" in html and "<b>nightly</b>" not in html
    assert f"{run.summaries['context-similarity'].mean:.3f}" in html
    assert run.name == "<b>nightly</b>" and run.tags == {}


def test_each_metric_records_its_settings_prompts_and_pass_mark():
    from contextlens.metrics.registry import create

    run = _run()
    settings = run.summaries["context-similarity"].settings
    # a similarity is not a probability: no pass mark unless one is set
    assert settings is not None and run.summaries["context-similarity"].threshold is None
    strict = _run(thresholds={"context-similarity": 0.9}).summaries["context-similarity"]
    assert strict.threshold == 0.9 and strict.settings.values["threshold"] is None
    assert settings.values["threshold"] is None
    precision = settings_of(create("context-precision"))
    assert precision.prompts is not None and len(precision.prompts) == 16
    assert str(precision.values["few_shot_examples"]).startswith("sha256:")  # long: digested
    assert settings_of(create("context-precision")).fingerprint == precision.fingerprint
