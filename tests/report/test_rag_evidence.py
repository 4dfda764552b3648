"""The report's evidence of the citations and sufficient-context metrics: each claim's
citations with the wrong-source and dangling ones marked, and the case's cell of the 2x2."""

from __future__ import annotations

from contextlens import ModelTestCase, evaluate
from contextlens.report.evidence import evidence_of

CHUNKS = [
    "Refunds are paid within 14 days of the return.",
    "Standard shipping is free on orders over 50 euros.",
]
CASE = ModelTestCase(
    input="What is the warranty period of the espresso machine?",
    actual_output="Refunds are paid within 14 days [2]. Shipping is free on orders over 50 euros "
    "[2]. Ask in store [5].",
    retrieval_context=CHUNKS,
)


def _cells(table: dict) -> list[list[str]]:
    return [[c if isinstance(c, str) else c["text"] for c in row] for row in table["rows"]]


def test_citations_are_listed_per_claim_with_the_wrong_source_marked() -> None:
    [item] = evaluate([CASE], ["citations"], progress=False).results
    shown = evidence_of(item.details, CASE).to_json()
    [table] = shown["tables"]
    rows = _cells(table)
    assert rows[0][3] == "[2] → #2: wrong source" and rows[0][4] == "#1"
    assert rows[1][3] == "[2] → #2: supported"
    assert rows[2][3] == "[5] → #5: dangling"
    facts = dict(shown["facts"])
    assert facts["wrong-source citations"] == "1"
    assert facts["dangling citations"] == "[5] (claim 3)"
    [note] = [n for n in shown["chunks"]["1"] if n["n"] == 1]  # on chunk #2
    assert note["verdict"] == "no" and "supported by #1" in note["reason"]


def test_the_case_shows_its_cell_of_the_2x2() -> None:
    [item] = evaluate([CASE], ["sufficient-context"], progress=False).results
    shown = evidence_of(item.details, CASE).to_json()
    assert dict(shown["facts"])["cell"] == "insufficient, answered"
    [grid] = shown["tables"]
    assert _cells(grid) == [["sufficient", "", ""], ["insufficient", "this case", ""]]
    assert grid["rows"][1][1]["tone"] == "bad"


def test_the_metric_figures_count_the_answers_given_on_insufficient_context() -> None:
    from contextlens.report.views import Collected, collect_item, metric_view

    abstained = CASE.model_copy(update={"name": "abstained", "actual_output": "I don't know."})
    run = evaluate([CASE, abstained], ["sufficient-context"], progress=False)
    collected: dict[str, Collected] = {}
    for item in run.results:
        collect_item(collected, item)
    bucket = collected["sufficient-context"]
    view = metric_view("sufficient-context", run.summaries["sufficient-context"], bucket, 0)
    stat = view.stat["answered_on_insufficient"]
    assert stat.text == "1 of 2 (50%)" and stat.tone == "bad"
    assert view.stat["cell:insufficient, abstained"].raw == 1
