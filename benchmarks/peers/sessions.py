"""The workload as sessions, for the session-level context-awareness metrics.

Standard library only. Consecutive cases are grouped, ``per_session`` to a session (the
last one takes what is left); the session's system context is its first case's chunks,
joined, and each case is one interaction: the query (``input``), the assistant's reply
(``actual_output``) and the ground-truth reply (``expected_output``). Only the first
interaction of a session is about the product its context describes.

A session is a dict with gaussia's (and contextlens') ``Dataset`` fields: ``session_id``,
``assistant_id``, ``language``, ``context`` and ``conversation``, a list of dicts with
``qa_id``, ``query``, ``assistant`` and ``ground_truth_assistant``.
"""

from __future__ import annotations

from typing import Any

ASSISTANT_ID = "bench-assistant"


def make_sessions(cases: list[dict[str, Any]], per_session: int = 4) -> list[dict[str, Any]]:
    """``cases`` (bench_peers' generated RAG cases) grouped into sessions, in order."""
    if per_session < 1:
        raise ValueError(f"per_session must be at least 1, got {per_session}")
    sessions: list[dict[str, Any]] = []
    for start in range(0, len(cases), per_session):
        group = cases[start : start + per_session]
        sessions.append(
            {
                "session_id": f"session-{len(sessions):04d}",
                "assistant_id": ASSISTANT_ID,
                "language": "english",
                "context": "\n\n".join(group[0]["retrieval_context"]),
                "conversation": [
                    {
                        "qa_id": f"q{start + i:04d}",
                        "query": case["input"],
                        "assistant": case["actual_output"],
                        "ground_truth_assistant": case["expected_output"],
                    }
                    for i, case in enumerate(group)
                ],
            }
        )
    return sessions


def count_interactions(sessions: list[dict[str, Any]]) -> int:
    """The number of interactions (cases) in ``sessions``."""
    return sum(len(s["conversation"]) for s in sessions)
