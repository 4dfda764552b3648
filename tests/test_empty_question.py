"""A case without a question (a summary) is ordinary data: accepted by ``run``,
``calibrate`` and ``evaluate()`` for every metric that does not require it, and refused,
naming the file, line and field, by a metric that does."""

import json

from contextlens import evaluate
from contextlens.calibration import calibrate
from contextlens.schemas import Batch, Dataset, ModelTestCase

DOCUMENT = (
    "The company raised its quarterly dividend to $0.13 per share. It expects net debt to "
    "fall below $25 billion by the end of the first quarter."
)
#: A summarisation row as SummEdits gives it: the question is empty.
SUMMARY = {
    "id": "summedits-1",
    "question": "",
    "contexts": [DOCUMENT],
    "answer": "The quarterly dividend was raised to $0.13 per share.",
}
EDITED = {
    "id": "summedits-2",
    "contexts": [DOCUMENT],  # no question at all
    "answer": "The quarterly dividend was cut to $0.03 per share.",
}


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_run_scores_summaries_without_a_question(run_cli, tmp_path):
    path = jsonl(tmp_path / "summaries.jsonl", [SUMMARY, EDITED])
    out = tmp_path / "out"
    code, text = run_cli("run", path, "-m", "faithfulness", "--out", out, "-q", "--no-store")
    assert code == 0, text
    summary = json.loads((out / "latest" / "summary.json").read_text())["summaries"]
    assert summary["faithfulness"]["n_scored"] == 2
    assert summary["faithfulness"]["n_failed"] == 0


def test_calibrate_takes_labelled_summaries_without_a_question(run_cli, tmp_path):
    rows = [{**SUMMARY, "label": 1}, {**EDITED, "label": 0}]
    path = jsonl(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "out"
    code, text = run_cli("calibrate", path, "--metric", "faithfulness", "--out", out, "-q")
    assert code == 0, text
    saved = json.loads((out / "latest" / "calibration.json").read_text(encoding="utf-8"))
    assert (saved["n"], saved["n_failed"]) == (2, 0)
    report = calibrate(path, "context", cache=False, progress=False)  # a session of one turn
    assert (report.n, report.n_failed) == (2, 0)


def test_a_metric_that_reads_the_question_still_refuses_it_by_file_line_and_field(
    run_cli, tmp_path
):
    path = jsonl(tmp_path / "summaries.jsonl", [{**SUMMARY, "question": "What changed?"}, EDITED])
    code, text = run_cli(
        "run", path, "-m", "contextual-relevancy", "--out", tmp_path / "o", "-q", "--no-store"
    )
    assert code == 2
    message = "field 'input': metric 'contextual-relevancy' requires 'input', which is empty"
    assert f"summaries.jsonl:2: {message}" in " ".join(text.split())
    labelled = jsonl(tmp_path / "labelled.jsonl", [{**EDITED, "label": 0}])
    code, text = run_cli(
        "calibrate", labelled, "--metric", "contextual-relevancy", "--out", tmp_path / "c", "-q"
    )
    assert code == 2
    assert f"labelled.jsonl:1: {message}" in " ".join(text.split())


def test_evaluate_takes_cases_without_a_question():
    reference = {"expected_output": SUMMARY["answer"]}
    cases = [
        ModelTestCase(
            name="a", actual_output=SUMMARY["answer"], retrieval_context=[DOCUMENT], **reference
        ),
        {
            "name": "b",
            "input": None,
            "answer": EDITED["answer"],
            "contexts": [DOCUMENT],
            **reference,
        },
    ]
    run = evaluate(cases, ["faithfulness", "context-recall"])
    assert run.summary("faithfulness").n_scored == 2
    assert run.summary("context-recall").n_scored == 2
    session = Dataset(
        session_id="s",
        assistant_id="bot",
        context=DOCUMENT,
        conversation=[Batch(qa_id="1", assistant=SUMMARY["answer"])],  # no query
    )
    assert evaluate([session], ["context"]).summary("context").n_scored == 1
