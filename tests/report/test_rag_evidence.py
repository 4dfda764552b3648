"""The report's evidence of the citations, sufficient-context and diagnostics metrics and of
tool calls: each claim's citations with the wrong-source and dangling ones marked, the case's
cell of the 2x2, what each answer claim is, and which claims rest on which tool output."""

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


def test_the_tool_use_view_says_which_claims_rest_on_which_tool_output() -> None:
    case = ModelTestCase(
        input="What is the weather in Oslo, and what is the capital of Norway?",
        actual_output="It is 3 degrees and raining in Oslo. Oslo is the capital of Norway.",
        retrieval_context=["Oslo is the capital of Norway."],
        tools_called=[
            {
                "name": "weather",
                "input_parameters": {"city": "Oslo"},
                "output": "Oslo: 3 degrees, raining.",
            },
            {"name": "calendar", "input_parameters": {}, "output": "No events today."},
        ],
    )
    [item] = evaluate([case], ["faithfulness"], progress=False).results
    shown = evidence_of(item.details, case).to_json()
    [tools] = [t for t in shown["tables"] if t["title"] == "Tool use"]
    rows = _cells(tools)
    assert rows[0][0] == "tools_called[0] (weather)" and rows[0][3] == "#1 (supported)"
    assert rows[1][0] == "tools_called[1] (calendar)"
    assert rows[1][3] == "none: no claim rests on its output"
    assert dict(shown["facts"])["claims resting on a tool output"] == "1 of 2"


def test_the_diagnostics_show_what_each_answer_claim_is() -> None:
    case = ModelTestCase(
        input="How tall is the Eiffel Tower?",
        actual_output="The Eiffel Tower is 330 metres tall. The Eiffel Tower is painted blue.",
        expected_output="The Eiffel Tower is 330 metres tall.",
        retrieval_context=["The Eiffel Tower is 330 metres tall.", "The Louvre is a museum."],
    )
    [item] = evaluate([case], ["rag-diagnostics"], progress=False).results
    shown = evidence_of(item.details, case).to_json()
    answer = _cells(next(t for t in shown["tables"] if t["title"] == "Claims of the answer"))
    assert [row[2] for row in answer] == ["correct, supported", "hallucination"]
    assert answer[0][3] == "#1"
    facts = dict(shown["facts"])
    assert facts["hallucination"] == "0.500" and facts["method"] == "offline"
    assert [m["tone"] for m in shown["marks"]] == ["good", "bad"]
    assert "relevant" in shown["chunks"]["0"][0]["label"]
