"""The four RAG metrics (faithfulness, context-recall, context-precision-ranked, retrieval)
where a user meets them: `contextlens schema`, `run` and `evaluate`, offline and judged by a
server on 127.0.0.1, `calibrate` and the pytest plugin."""

import json

import pytest

from contextlens import ModelTestCase, calibrate, evaluate
from contextlens.pytest_plugin import assert_context
from contextlens.testing import FakeOpenAIServer
from support.rag import CASES, rule_reply

NEW = ("faithfulness", "context-recall", "context-precision-ranked", "retrieval")
JUDGED = NEW[:3]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_schema_lists_the_four_metrics_with_the_fields_each_needs(run_cli):
    code, text = run_cli("schema")
    assert code == 0, text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 4}
    needs = {
        "faithfulness": "actual_output, retrieval_context",
        "context-recall": "expected_output, retrieval_context",
        "context-precision-ranked": "input, retrieval_context",
        "retrieval": "retrieved_ids, relevant_ids",
    }
    for name, fields in needs.items():
        assert name in rows, text
        assert fields in " ".join(rows[name].split()), rows[name]
    # the field table is stacked (each field's name on a line of its own) when it is too wide
    lines = text.splitlines()
    for field, alias in (
        ("retrieved_ids", "retrieved_context_ids"),
        ("relevant_ids", "expected_ids"),
    ):
        at = next(
            i for i, line in enumerate(lines) if line.startswith(field) or f"│ {field} " in line
        )
        assert alias in " ".join(lines[at : at + 3]), lines[at : at + 3]


@pytest.mark.parametrize("judged", [False, True], ids=["offline", "judged"])
def test_each_runs_through_run_and_evaluate(run_cli, tmp_path, judged):
    cases = write_jsonl(tmp_path / "cases.jsonl", CASES)
    args = ["run", cases, *(a for m in NEW for a in ("-m", m)), "-q", "--no-store"]
    with FakeOpenAIServer(reply=rule_reply) as server:
        judge = ["--judge", f"{server.base_url}#judge"] if judged else []
        code, text = run_cli(*args, *judge, "--out", tmp_path / "out")
        assert code == 0, text
        summary = json.loads((tmp_path / "out" / "latest" / "summary.json").read_text())
        lines = (tmp_path / "out" / "latest" / "results.jsonl").read_text().splitlines()
        assert server.calls == (len(JUDGED) * len(CASES) if judged else 0)
        run = evaluate(
            [ModelTestCase(**c) for c in CASES],
            list(NEW),
            judge=f"{server.base_url}#judge" if judged else None,
            progress=False,
        )
    assert list(summary["summaries"]) == list(NEW)
    items = [json.loads(line) for line in lines]
    assert {(i["case_id"], i["metric"]) for i in items} == {
        (c["id"], m) for c in CASES for m in NEW
    }
    assert not [i for i in items if i["error"]]
    for name in NEW:
        s = run.summaries[name]
        assert (s.n, s.n_failed) == (2, 0) and s.ci_low is not None and s.ci_high is not None
        assert s.judge == (
            None if name == "retrieval" else "openai-compat:judge" if judged else "offline"
        )
        assert summary["summaries"][name]["mean"] == pytest.approx(s.mean)
    by = {(r.case_id, str(r.metric)): r for r in run.results}
    if judged:
        # the rule judge: "It opens on weekends too." is in no chunk; c1 alone is useful
        faithful = by[("hours", "faithfulness")]
        assert faithful.score == 0.5 and "'It opens on weekends too.'" in faithful.reason
        assert "closest chunk: retrieval_context[0]" in faithful.reason
        assert by[("loans", "context-recall")].score == 1.0
        ranked = by[("loans", "context-precision-ranked")]
        assert ranked.score == 0.5 and [v.verdict for v in ranked.details.verdicts] == ["no", "yes"]
    else:
        for name in JUDGED:
            assert "Offline estimate" in by[("hours", name)].reason
    assert by[("loans", "retrieval")].details.measures.mrr == 0.5


def test_calibrate_and_the_pytest_plugin_know_them(tmp_path):
    rows = [{**c, "label": label} for c, label in zip(CASES * 2, (1, 0, 1, 0), strict=True)]
    rows = [{**r, "id": f"{r['id']}-{i}"} for i, r in enumerate(rows)]
    report = calibrate(rows, metric="context-recall", progress=False, out=tmp_path)
    assert report.metric == "context-recall" and (report.n, report.n_failed) == (4, 0)
    [item] = assert_context(ModelTestCase(**CASES[1]), ["retrieval"], thresholds={"retrieval": 0.5})
    assert item.score == pytest.approx(0.6309, abs=1e-4)  # nDCG@10 of a hit at rank 2
    with pytest.raises(AssertionError, match=r"retrieval: score 0\.63"):
        assert_context(ModelTestCase(**CASES[1]), ["retrieval"], thresholds={"retrieval": 0.9})
