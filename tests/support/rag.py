"""Handmade RAG cases (a library's rules) and a rule-following judge for the faithfulness,
context-recall and ranked context-precision prompts, shared by their tests."""

from __future__ import annotations

import json
import re

from support import blocks

CHUNKS = [
    "Opening hours: Monday to Friday, 9am to 6pm. Closed on weekends.",
    "Members can borrow up to five books for three weeks.",
    "The library was founded in 1901 by the town council.",
]
CASES = [
    {
        "id": "hours",
        "input": "When is the library open?",
        "actual_output": "Monday to Friday, 9am to 6pm. It opens on weekends too.",
        "expected_output": "Monday to Friday, 9am to 6pm.",
        "retrieval_context": CHUNKS,
        "retrieved_ids": ["c1", "c2", "c3"],
        "relevant_ids": {"c1": 2, "c3": 0},
    },
    {
        "id": "loans",
        "input": "How many books can members borrow?",
        "actual_output": "Members can borrow up to five books.",
        "expected_output": "Up to five books, for three weeks.",
        "retrieval_context": [CHUNKS[2], CHUNKS[1]],
        "retrieved_ids": ["c3", "c2"],
        "relevant_ids": ["c2"],
    },
]

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the is it to of for on up also can be and by".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _block(prompt: str, tag: str) -> str:
    """The text of the prompt's first ``tag`` data block, or ""."""
    return next(iter(blocks(prompt, tag)), "")


def chunks_of(prompt: str) -> list[str]:
    """The texts of the prompt's numbered chunk and tool blocks, in order."""
    found = re.findall(
        r"Chunk \d+[^\n]*:\n<(chunk|tool)_([0-9a-f]+)>\n(.*?)\n</\1_\2>", prompt, re.S
    )
    return [text for _tag, _mark, text in found]


def rule_reply(request: dict) -> str:
    """A judge that follows the prompts by rule: a claim (a sentence of the text) is
    supported when a chunk holds all its words; a chunk is useful when it shares two words
    with the reference (or, without one, with the input)."""
    system, prompt = (m["content"] for m in request["messages"])
    chunks = chunks_of(prompt)
    asked = json.dumps(request.get("response_format") or {}) + system
    if '"claims"' in asked or "{claims:" in asked:  # the reply format sent or stated
        text = _block(prompt, "output") or _block(prompt, "expected_output")
        claims = []
        for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
            words = _words(sentence)
            overlaps = [len(words & _words(c)) for c in chunks]
            best = max(range(len(chunks)), key=overlaps.__getitem__) if chunks else -1
            supported = best >= 0 and words <= _words(chunks[best])
            claims.append(
                {
                    "claim": sentence,
                    "chunk": best + 1 if best >= 0 and overlaps[best] else 0,
                    "reason": "stated in the chunk" if supported else "not in any chunk",
                    "verdict": "yes" if supported else "no",
                }
            )
        return json.dumps({"claims": claims})
    target = _words(_block(prompt, "expected_output") or _block(prompt, "input"))
    verdicts = [
        {
            "reason": "holds the answer" if len(target & _words(c)) >= 2 else "off the point",
            "verdict": "yes" if len(target & _words(c)) >= 2 else "no",
        }
        for c in chunks
    ]
    return json.dumps({"verdicts": verdicts})
