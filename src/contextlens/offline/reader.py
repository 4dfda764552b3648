"""The claim reader: all-MiniLM-L6-v2 fine-tuned as a three-way pair classifier, int8 ONNX.

It reads a claim and its evidence window together (``[CLS] claim [SEP] window [SEP]``) and
gives, for each pair, the probabilities that the window supports the claim, contradicts it
or does not mention it: what no comparison of two separate embeddings can see (a swapped
name, number or date, a negation, an antonym, a fact added). It was trained by
``benchmarks/train_reader.py`` from the sentence-transformers weights on pairs made from
the sentences of public contexts (copies, clauses, fusions, rewordings: supported; one fact
changed: contradicted; sentences from elsewhere or with a fact added: not mentioned) and
on the natural answers of the public labelled sets, exported to ONNX and quantised to int8
with onnxruntime; the file ships in ``offline/assets/claim-reader/`` and is checked
against its sha256 before first use. It runs on onnxruntime's CPU provider with the
bundled MiniLM tokenizer, as the embedder does.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from contextlens.embeddings.base import Embedder, embed_distinct
from contextlens.errors import ContextLensError
from contextlens.offline.support import MIN_WEIGHT, SupportItem, evidence_and_claims
from contextlens.offline.windows import claim_text, windows

__all__ = [
    "VERDICTS",
    "ClaimReader",
    "ModelIntegrityError",
    "claim_pairs",
    "default_reader",
    "reply_score",
]

_ASSETS = "assets/claim-reader"  # in contextlens.offline
#: The reader's verdicts, in the order of its outputs.
VERDICTS = ("supported", "contradicted", "not mentioned")
SUPPORTED, CONTRADICTED, NOT_MENTIONED = range(3)
_TOKENIZER = "assets/all-MiniLM-L6-v2/tokenizer.json"  # in contextlens.embeddings
#: Word pieces of a pair, [CLS] and both [SEP] included.
MAX_TOKENS = 128


class ModelIntegrityError(ContextLensError):
    """The reader's model file's sha256 is not the one it shipped with."""


@dataclass(frozen=True)
class ItemPairs:
    """The claims of one item and each claim's (claim text, evidence window) pair; no pairs
    when the item has no claim or no evidence."""

    claims: list[str]
    pairs: list[tuple[str, str]]


async def claim_pairs(items: Sequence[SupportItem], embedder: Embedder) -> list[ItemPairs]:
    """Each item's claims and their pairs; the claims and evidence sentences are embedded in
    one call (the same texts the support features embed)."""
    claim_lists, evidences = evidence_and_claims(items)
    texts = [t for group in (*claim_lists, *(e.sentences for e in evidences)) for t in group]
    vectors = await embed_distinct(embedder, texts)
    out: list[ItemPairs] = []
    for item, claims, ev in zip(items, claim_lists, evidences, strict=True):
        if not claims or not ev.sentences:
            out.append(ItemPairs(claims, []))
            continue
        found = windows(vectors.of(claims), vectors.of(ev.sentences), ev.sentences)
        texts = [claim_text(c, item.question) for c in claims]
        out.append(ItemPairs(claims, list(zip(texts, found, strict=True))))
    return out


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _shipped() -> tuple[Path, dict[str, Any]]:
    """The shipped model file and its card (``model.json``)."""
    folder = resources.files("contextlens.offline") / _ASSETS
    try:
        card = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the claim reader is not installed: no {_ASSETS}/model.json in contextlens.offline"
        ) from None
    return Path(str(folder / "model.onnx")), card


class ClaimReader:
    """The verdict probabilities of (claim, evidence window) pairs.

    Args:
        model_path: an ONNX pair classifier taking ``input_ids``, ``attention_mask`` and
            ``token_type_ids`` and giving one logit per verdict of :data:`VERDICTS` for
            each pair (default: the shipped one,
            checked against the sha256 in its ``model.json``).
        sha256: the digest ``model_path`` must have (default: the shipped file's; None
            with a ``model_path`` of your own skips the check).
        threads: onnxruntime intra-op threads (default: the usable CPUs).
        max_batch_tokens: padded word pieces per onnxruntime run, at most.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        sha256: str | None = None,
        threads: int | None = None,
        max_batch_tokens: int = 4096,
    ) -> None:
        self.sha256: str | None
        if model_path is None:
            shipped, self.card = _shipped()
            self.model_path, self.sha256 = shipped, str(self.card["sha256"])
        else:
            self.card, self.model_path, self.sha256 = {}, Path(model_path), sha256
        self.threads = threads or _cpu_count()
        self.max_batch_tokens = max_batch_tokens
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None

    @property
    def name(self) -> str:
        return str(self.card.get("name", self.model_path.stem))

    def _load(self) -> tuple[ort.InferenceSession, Tokenizer]:
        with self._lock:
            if self._session is None or self._tokenizer is None:
                if self.sha256 is not None:
                    actual = _file_sha256(self.model_path)
                    if actual != self.sha256:
                        raise ModelIntegrityError(
                            f"sha256 mismatch for the claim reader {self.model_path}: "
                            f"expected {self.sha256}, got {actual}"
                        )
                opts = ort.SessionOptions()
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                opts.intra_op_num_threads = self.threads
                opts.inter_op_num_threads = 1
                self._session = ort.InferenceSession(
                    str(self.model_path), sess_options=opts, providers=["CPUExecutionProvider"]
                )
                text = (resources.files("contextlens.embeddings") / _TOKENIZER).read_text(
                    encoding="utf-8"
                )
                tok = Tokenizer.from_str(text)
                tok.no_padding()
                tok.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
                self._tokenizer = tok
            return self._session, self._tokenizer

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One row of verdict probabilities per pair, in order (float64, ``(n, 3)``)."""
        if not pairs:
            return np.zeros((0, len(VERDICTS)))
        session, tok = self._load()
        encoded = tok.encode_batch([(a, b) for a, b in pairs])
        lengths = [len(e.ids) for e in encoded]
        logits = np.empty((len(pairs), len(VERDICTS)))
        order = sorted(range(len(pairs)), key=lengths.__getitem__)
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and (end - start + 1) * lengths[order[end]] <= max(
                self.max_batch_tokens, lengths[order[end]]
            ):
                end += 1
            idx = order[start:end]
            width = max(lengths[i] for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros_like(ids)
            mask = np.zeros_like(ids)
            for row, i in enumerate(idx):
                e = encoded[i]
                ids[row, : lengths[i]] = e.ids
                types[row, : lengths[i]] = e.type_ids
                mask[row, : lengths[i]] = 1
            (out,) = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            )
            logits[idx] = np.asarray(out, dtype=np.float64).reshape(len(idx), len(VERDICTS))
            start = end
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)


def _cpu_count() -> int:
    import os

    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def reply_score(probabilities: np.ndarray) -> float:
    """A reply's support from its claims' verdict rows: the mean probability of
    "supported" pulled half-way (:data:`MIN_WEIGHT`) to the weakest claim's."""
    supported = np.asarray(probabilities)[:, SUPPORTED]
    return float((1 - MIN_WEIGHT) * supported.mean() + MIN_WEIGHT * supported.min())


@cache
def default_reader() -> ClaimReader:
    """The process-wide shipped claim reader."""
    return ClaimReader()
