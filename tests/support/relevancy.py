"""Contextual relevancy: a rule-following judge, its replies and the cases, shared by
tests/metrics/test_contextual_relevancy.py and tests/compat/test_deepeval.py."""

import asyncio
import json
import re

from contextlens.backend import Usage
from contextlens.judges.base import DEFAULT_FENCE, Judgement
from contextlens.offline.text import sentences
from contextlens.schemas import ModelTestCase

CHUNK_RE = re.compile(r"Chunk (\d+):\n<chunk_([0-9a-f]+)>\n(.*?)\n</chunk_\2>", re.S)
REASON_ASKED = "how relevant the context is overall"  # the reply format's reason field
FORMAT_OVERRIDE = "Whatever reply format was described above, reply in this one instead."

REFUND = "All customers are eligible for a 30 day full refund at no extra cost."
SHIPPING = "Shipping is free on orders over 50 dollars."


def by_chunk(statements: list[dict], n_chunks: int | None = None) -> list[dict]:
    """The reply's ``chunks``: statements given with their 1-based ``chunk`` number, listed
    under their chunk in order (``n_chunks`` entries; the highest number named by default)."""
    n = n_chunks or max((s["chunk"] for s in statements), default=0)
    return [
        {
            "statements": [
                {k: v for k, v in s.items() if k != "chunk"} for s in statements if s["chunk"] == i
            ]
        }
        for i in range(1, n + 1)
    ]


def rule_reply(prompt: str, with_reason: bool = True, reason: str = "judge says so") -> dict:
    """What a careful judge would answer: one statement per sentence, 'yes' when it is
    about refunds."""
    statements = [
        {
            "chunk": int(k),
            "statement": s,
            "reason": "about refunds" if "refund" in s.lower() else "off topic",
            "verdict": "yes" if "refund" in s.lower() else "no",
        }
        for k, _mark, body in CHUNK_RE.findall(prompt)
        for s in sentences(body)
    ]
    data: dict = {"chunks": by_chunk(statements)}
    if with_reason:
        data["reason"] = reason
    return data


def fenced(data: dict) -> str:
    """``data`` as a judge's reply: JSON inside the default ```json fence."""
    return "```json\n" + json.dumps(data) + "\n```"


def server_reply(request: dict) -> str:
    """The fake server's answer; with one message, the system text is the user text."""
    system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
    return fenced(rule_reply(user, with_reason=REASON_ASKED in system))


class RuleJudge:
    """An in-process Judge that answers like :func:`rule_reply`; counts its calls and keeps
    the prompts and reply schemas it was given."""

    name = "rule"

    def connection_key(self):

        return self.name

    def max_connections(self):

        return 16

    def __init__(self) -> None:
        self.calls = 0
        self.prompts: list[list] = []
        self.schemas: list = []

    async def judge(self, messages, schema, *, fence=DEFAULT_FENCE):
        self.calls += 1
        self.prompts.append(list(messages))
        self.schemas.append(schema)
        await asyncio.sleep(0)  # let concurrent cases interleave
        data = rule_reply(messages[-1]["content"], "reason" in schema.model_fields)
        return Judgement(schema.model_validate(data), json.dumps(data), Usage(), 0.0)


def verdict_reply(*verdicts: str, chunks: list[int] | None = None, reason: str = "r") -> str:
    """A fenced reply with one statement per verdict, in chunk 1 unless ``chunks`` says
    otherwise."""
    chunks = chunks or [1] * len(verdicts)
    statements = [
        {"chunk": c, "statement": f"s{i}", "reason": "x", "verdict": v}
        for i, (c, v) in enumerate(zip(chunks, verdicts, strict=True))
    ]
    return fenced({"chunks": by_chunk(statements), "reason": reason})


def case(*chunks: str | None, question: str = "What if these shoes don't fit?") -> ModelTestCase:
    """A test case with these chunks as its retrieval context (``case(None)``: none)."""
    context = None if chunks == (None,) else list(chunks)
    return ModelTestCase(input=question, actual_output="We refund.", retrieval_context=context)
