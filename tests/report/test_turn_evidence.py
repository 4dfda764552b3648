"""A session scored by a turn metric shows each turn with its own chunks and verdicts."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from contextlens.cases import CaseRecord
from contextlens.report import render_report
from contextlens.report.evidence import evidence_of
from contextlens.runner import evaluate
from contextlens.schemas import Batch, Dataset
from contextlens.testing import FakeOpenAIServer
from support.rag import rule_reply

SESSION = Dataset(
    session_id="museum",
    assistant_id="guide",
    context="You answer questions about the town museum.",
    conversation=[
        Batch(
            qa_id="t1",
            query="When does the museum open?",
            assistant="The museum opens at 9am. It has a cafe.",
            retrieval_context=["The museum opens at 9am on weekdays."],
        ),
        Batch(qa_id="t2", query="Thanks!", assistant="You are welcome."),
    ],
)


class CaseBlock(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: dict[str, str] = {}
        self._id: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self._id = found.get("id") if found.get("type") == "application/json" else None

    def handle_endtag(self, tag: str) -> None:
        self._id = None

    def handle_data(self, data: str) -> None:
        if self._id is not None:
            self.found[self._id] = self.found.get(self._id, "") + data


def judged_run():
    with FakeOpenAIServer(reply=rule_reply) as server:
        return evaluate(
            [SESSION], ["turn-faithfulness"], judge=f"{server.base_url}#j", progress=False
        )


def test_each_turn_carries_its_verdict_and_the_claims_on_its_chunks():
    [result] = judged_run().results
    ev = evidence_of(result.details, SESSION)
    t1, t2 = ev.turns["t1"], ev.turns["t2"]
    assert t1["score"] == 0.5 and t2["not_applicable"].startswith("not applicable")
    [note] = t1["chunks"]["0"]
    assert note["kind"] == "claim" and note["verdict"] == "yes"
    assert {(m["on"], m["tone"]) for m in ev.marks} == {
        ("turn:t1:assistant", "good"),
        ("turn:t1:assistant", "bad"),
    }
    assert ("turns not applicable", "1") in ev.facts
    assert any(t.title == "t1: Claims of the answer" for t in ev.tables)


def test_the_case_page_holds_each_turns_chunks():
    run = judged_run()
    page = CaseBlock(render_report(run.with_cases([CaseRecord(case_id="museum", case=SESSION)])))
    detail = json.loads(page.found["cl-case-0"])
    turns = detail["turns"]
    assert turns[0]["chunks"] == ["The museum opens at 9am on weekdays."]
    assert turns[1]["chunks"] is None
    assert detail["metrics"][0]["turns"]["t1"]["chunks"]["0"][0]["kind"] == "claim"


def test_a_turns_tool_calls_are_on_its_page_and_in_its_tool_use_table():
    weather = {
        "name": "weather",
        "input_parameters": {"city": "Oslo"},
        "output": "Oslo: 3 degrees.",
    }
    session = SESSION.model_copy(
        update={
            "conversation": [
                Batch(
                    qa_id="w1",
                    query="Weather in Oslo?",
                    assistant="Oslo: 3 degrees.",
                    tools_called=[weather],
                )
            ]
        }
    )
    with FakeOpenAIServer(reply=rule_reply) as server:
        run = evaluate(
            [session], ["turn-faithfulness"], judge=f"{server.base_url}#j", progress=False
        )
    [result] = run.results
    ev = evidence_of(result.details, session)
    [tools] = [t for t in ev.tables if t.title == "w1: Tool use"]
    assert tools.rows[0][0] == "tools_called[0] (weather)"
    page = CaseBlock(render_report(run.with_cases([CaseRecord(case_id="museum", case=session)])))
    [turn] = json.loads(page.found["cl-case-0"])["turns"]
    assert turn["tools"] == [
        {"label": "tools_called[0] (weather)", "input": "city: Oslo", "output": "Oslo: 3 degrees."}
    ]
