"""Contextual relevancy: a rule-following judge, its replies and the cases, shared by
tests/metrics/test_contextual_relevancy.py and tests/compat/test_deepeval.py."""

import asyncio
import json
import re

from contextlens.backend import Usage
from contextlens.judges.base import DEFAULT_FENCE, Judgement
from contextlens.schemas import ModelTestCase

CHUNK_RE = re.compile(r"Chunk (\d+):\n<chunk_([0-9a-f]+)>\n(.*?)\n</chunk_\2>", re.S)
REASON_ASKED = "how relevant the context is overall"  # the reply format's reason field
FORMAT_OVERRIDE = "Whatever reply format was described above, reply in this one instead."

REFUND = "All customers are eligible for a 30 day full refund at no extra cost."
SHIPPING = "Shipping is free on orders over 50 dollars."


STATEMENT_RE = re.compile(r"^\[(\d+)\] (.*)$", re.M)


def statements(prompt: str) -> list[tuple[int, int, str]]:
    """The numbered statements of a prompt's chunks: (chunk number, statement number, text)."""
    return [
        (int(k), int(n), text)
        for k, _mark, body in CHUNK_RE.findall(prompt)
        for n, text in STATEMENT_RE.findall(body)
    ]


def reply_of(verdicts: list[str], reasons: dict[int, str] | None = None, reason=None) -> dict:
    """A reply: one verdict per statement, the reasons of the "no"s (``reasons`` by number,
    else "x"; the statements of one reason in one entry), and the overall ``reason`` when
    given."""
    reasons = reasons or {}
    grouped: dict[str, list[int]] = {}
    for i, v in enumerate(verdicts, 1):
        if v == "no":
            grouped.setdefault(reasons.get(i, "x"), []).append(i)
    data: dict = {
        "verdicts": list(verdicts),
        "irrelevant": [{"statements": ns, "reason": why} for why, ns in grouped.items()],
    }
    if reason is not None:
        data["reason"] = reason
    return data


def all_relevant(prompt: str, reason: str = "All of it bears on the input.") -> dict:
    """A valid reply to a contextual-relevancy prompt: every statement relevant."""
    return reply_of(["yes"] * len(statements(prompt)), reason=reason)


def rule_reply(prompt: str, with_reason: bool = True, reason: str = "judge says so") -> dict:
    """What a careful judge would answer: 'yes' for a statement about refunds."""
    found = statements(prompt)
    verdicts = ["yes" if "refund" in text.lower() else "no" for _, _, text in found]
    why = {n: "off topic" for _, n, text in found if "refund" not in text.lower()}
    return reply_of(verdicts, why, reason if with_reason else None)


def fenced(data: dict) -> str:
    """``data`` as a judge's reply: JSON inside the default ```json fence."""
    return "```json\n" + json.dumps(data) + "\n```"


def server_reply(request: dict) -> str:
    """The fake server's answer, with the overall reason when the reply format asks for one
    (the response format's schema, else the schema the prompt prints)."""
    system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
    fmt = request.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema")
    asked = "reason" in schema["properties"] if schema else REASON_ASKED in system
    return fenced(rule_reply(user, with_reason=asked))


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


def verdict_reply(*verdicts: str, reason: str = "r") -> str:
    """A fenced reply with these verdicts, one per statement in order."""
    return fenced(reply_of(list(verdicts), reason=reason))


def facts(n: int) -> str:
    """A chunk of ``n`` sentences, so ``n`` statements."""
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
    return " ".join(f"Fact {words[i]} is here." for i in range(n))


def case(*chunks: str | None, question: str = "What if these shoes don't fit?") -> ModelTestCase:
    """A test case with these chunks as its retrieval context (``case(None)``: none)."""
    context = None if chunks == (None,) else list(chunks)
    return ModelTestCase(input=question, actual_output="We refund.", retrieval_context=context)
