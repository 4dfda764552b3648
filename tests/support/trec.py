"""The TREC Deep Learning 2019 and 2020 passage judgements of the shared data folder, and a
BM25 ranking of their passages, for checking the retrieval measures against trec_eval.

The ranking is this module's own: every judged passage of a year is a document, each query
ranks all of them (so passages judged for other queries come in as unjudged ones). Nothing
here pins a score; the tests compare two implementations on the same rankings.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_WORD = re.compile(r"[a-z0-9]+")


def data_dir() -> Path | None:
    """The shared data folder: ``$CONTEXTLENS_SHARED_DATA``, ``../shared/data`` beside the
    repository, or ``/work/shared/data``; None when none holds the TREC files."""
    repo = Path(__file__).resolve().parents[2]
    candidates = [os.environ.get("CONTEXTLENS_SHARED_DATA"), repo.parent / "shared" / "data"]
    candidates.append("/work/shared/data")
    for found in candidates:
        if found and (Path(found) / "trec_dl20_passage_graded.jsonl").exists():
            return Path(found)
    return None


@dataclass(frozen=True)
class Year:
    """One year's judgements (query id -> doc id -> grade), query texts and passages."""

    name: str
    qrels: dict[str, dict[str, int]]
    queries: dict[str, str]
    passages: dict[str, str]


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@cache
def year(name: str) -> Year:
    """``dl19`` (trec_dl19_passage.jsonl) or ``dl20`` (trec_dl20_passage_graded.jsonl)."""
    folder = data_dir()
    assert folder is not None
    file = {"dl19": "trec_dl19_passage.jsonl", "dl20": "trec_dl20_passage_graded.jsonl"}[name]
    qrels: dict[str, dict[str, int]] = {}
    queries: dict[str, str] = {}
    passages: dict[str, str] = {}
    for row in _rows(folder / file):
        meta = row["meta"]
        qrels.setdefault(meta["query_id"], {})[meta["doc_id"]] = int(meta["grade"])
        queries[meta["query_id"]] = row["question"]
        passages[meta["doc_id"]] = row["contexts"][0]
    return Year(name, qrels, queries, passages)


@cache
def ranked_lists() -> list[tuple[str, list[str]]]:
    """trec_dl19_passage_ranked.jsonl: (query id, its 10 doc ids in the list's order)."""
    folder = data_dir()
    assert folder is not None
    return [
        (row["meta"]["query_id"], list(row["meta"]["doc_ids"]))
        for row in _rows(folder / "trec_dl19_passage_ranked.jsonl")
    ]


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@cache
def bm25(name: str, depth: int = 100, k1: float = 0.9, b: float = 0.4) -> dict[str, list[str]]:
    """Each query's top ``depth`` passages of its year by BM25, best first (ties by id)."""
    data = year(name)
    docs = {d: Counter(_tokens(t)) for d, t in data.passages.items()}
    lengths = {d: sum(c.values()) for d, c in docs.items()}
    mean_length = sum(lengths.values()) / len(lengths)
    postings: dict[str, list[tuple[str, int]]] = {}
    for d, counts in docs.items():
        for term, tf in counts.items():
            postings.setdefault(term, []).append((d, tf))
    n = len(docs)
    out: dict[str, list[str]] = {}
    for qid, text in data.queries.items():
        scores: dict[str, float] = {}
        for term in set(_tokens(text)):
            found = postings.get(term, [])
            idf = math.log(1 + (n - len(found) + 0.5) / (len(found) + 0.5))
            for d, tf in found:
                norm = tf + k1 * (1 - b + b * lengths[d] / mean_length)
                scores[d] = scores.get(d, 0.0) + idf * tf * (k1 + 1) / norm
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        out[qid] = ranked[:depth]
    return out
