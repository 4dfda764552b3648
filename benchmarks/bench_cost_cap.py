"""The cost cap: how much of it a capped run spends, and how its calls spread over metrics.

Run: .venv/bin/python benchmarks/bench_cost_cap.py [--cases 46] [--caps 0.003,0.01,0.03]
     [--concurrency 1,16] [--latency 0.05]

Five judged metrics (contextual relevancy, context precision, ranked context precision,
context recall, faithfulness) over RAG cases against a FakeOpenAIServer priced as
gpt-4o-mini, with no cache, under each cap at each concurrency. Per run: what was spent (as
the server's own token counts price it), its share of the cap, and the calls each metric got.

Targets: each capped run spends at least 80% of its cap and never more than it, and every
metric gets calls, at concurrency 1 and 16 alike.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import Any

from _workload import header, print_table

from contextlens import ModelTestCase, evaluate
from contextlens.engine.accounting import PRICES
from contextlens.testing import FakeOpenAIServer

MODEL = "bench-cost-judge"  # priced as gpt-4o-mini below; counted as characters / 4
PRICE = (0.15, 0.60)  # USD per million prompt and completion tokens
METRICS = [
    "contextual-relevancy",
    "context-precision",
    "context-precision-ranked",
    "context-recall",
    "faithfulness",
]
TARGET_SHARE = 0.8
REASON = (
    "The context states the refund window the answer gives, and the shipping chunk does not "
    "bear on the question."
)
_STATEMENT = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
_CHUNK = re.compile(r"<chunk_(\w+)>\n(.*?)\n</chunk_\1>", re.DOTALL)

CHUNKS = [
    "All customers are eligible for a 30 day full refund at no extra cost.",
    "Shipping is free on orders over 50 dollars. Express delivery takes two days.",
    "Our stores open at 9am on weekdays. They close at 6pm. Sundays are closed.",
    "Gift cards never expire. They cannot be exchanged for cash.",
]


def cases(n: int) -> list[ModelTestCase]:
    return [
        ModelTestCase(
            name=f"c{i}",
            input=f"What if these shoes don't fit (order {i})?",
            actual_output="We refund within 30 days. Shipping is free over 50 dollars.",
            expected_output="A full refund within 30 days.",
            retrieval_context=CHUNKS[: 2 + i % 3],
        )
        for i in range(n)
    ]


def _example(node: dict[str, Any], defs: dict[str, Any], key: str = "") -> Any:
    """A valid object for a JSON schema: a sentence for reasons, the first enum value, one
    array item (or as many as required), numbers clipped to their bounds."""
    while "$ref" in node:
        node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in node:
            options = [o for o in node[union] if o.get("type") != "null"] or node[union]
            return _example(options[0], defs, key)
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        return {k: _example(v, defs, k) for k, v in (node.get("properties") or {}).items()}
    if kind == "array":
        count = max(1, int(node.get("minItems", 0)))
        count = min(count, int(node.get("maxItems", count)))
        return [_example(node.get("items") or {"type": "string"}, defs, key)] * count
    if kind in ("number", "integer"):
        value = min(max(0.7, node.get("minimum", 0.7)), node.get("maximum", 0.7))
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    return REASON if "reason" in key.lower() else "The answer says so."


def reply(request: dict[str, Any]) -> str:
    """Contextual relevancy: a verdict per numbered statement ("yes" for refunds) and a reason
    for the others; any other prompt: an example of the schema it sends."""
    fmt = request.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    user = request["messages"][-1]["content"]
    if "verdicts" in (schema.get("properties") or {}) and _STATEMENT.search(user):
        verdicts, irrelevant = [], []
        for _mark, chunk in _CHUNK.findall(user):
            off = []
            for number, text in _STATEMENT.findall(chunk):
                verdicts.append("yes" if "refund" in text.lower() else "no")
                if verdicts[-1] == "no":
                    off.append(int(number))
            if off:
                irrelevant.append({"statements": off, "reason": "not about refunds"})
        answer: dict[str, Any] = {"verdicts": verdicts, "irrelevant": irrelevant}
        if "reason" in schema["properties"]:
            answer["reason"] = REASON
        return json.dumps(answer)
    return json.dumps(_example(schema, schema.get("$defs", {})))


def one_run(n: int, cap: float, concurrency: int, latency: float) -> list[Any]:
    with FakeOpenAIServer(reply=reply, latency=latency) as server:
        judge = f"{server.base_url}#{MODEL}?concurrency={concurrency}"
        began = time.perf_counter()
        run = evaluate(cases(n), METRICS, judge=judge, cache=False, max_cost=cap, progress=False)
        wall = time.perf_counter() - began
        paid = (server.prompt_tokens * PRICE[0] + server.completion_tokens * PRICE[1]) / 1e6
    by_metric = run.accounting.by_metric
    calls = [by_metric[m].calls if m in by_metric else 0 for m in METRICS]
    failed = sum(s.n_failed for s in run.summaries.values())
    ok = paid <= cap and (run.stopped is None or paid >= TARGET_SHARE * cap) and all(calls)
    return [
        f"${cap:g}",
        concurrency,
        f"${paid:.4f}",
        f"{paid / cap:.0%}",
        *calls,
        sum(s.n_not_run for s in run.summaries.values()),
        failed,
        f"{run.accounting.total.cost:.6f}" == f"{paid:.6f}",
        f"{wall:.1f}",
        "yes" if ok and not failed else "NO",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=46)
    parser.add_argument("--caps", default="0.003,0.01,0.03")
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    PRICES.register(MODEL, *PRICE)
    header(
        f"cost cap: {args.cases} cases x {len(METRICS)} judged metrics, no cache, "
        f"{args.latency * 1000:.0f} ms per call, priced ${PRICE[0]}/${PRICE[1]} per M tokens"
    )
    short = ["relevancy", "precision", "ranked", "recall", "faithful"]
    headers = ["cap", "concurrency", "spent", "of cap", *[f"calls {s}" for s in short]]
    headers += ["not run", "failed", "ledger = server", "wall s", "target met"]
    rows = [
        one_run(args.cases, float(cap), int(concurrency), args.latency)
        for cap in args.caps.split(",")
        for concurrency in args.concurrency.split(",")
    ]
    print_table(headers, rows)
    print(
        f"target: a stopped run spends >= {TARGET_SHARE:.0%} of its cap and never more, and "
        "every metric has calls"
    )


if __name__ == "__main__":
    main()
