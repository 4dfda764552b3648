"""Throughput of MiniLMEmbedder: sentences/s on 512 distinct sentences of ~31 words.

Run: .venv/bin/python benchmarks/bench_embedder.py [--sentences 512] [--repeats 3]

Reference (/work/shared/models/README.md): 285 sentences/s, batch 32, 2 cores.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from _workload import load_average

from contextlens.embeddings import MiniLMEmbedder

REFERENCE_PER_S = 285.0  # README: 512 sentences of ~31 words, batch 32, 2 cores

_WORDS = (
    "the a model context answer question retrieval document passage user assistant metric "
    "score judge faithful relevant claim evidence source policy customer order refund shipping "
    "delivery invoice account password reset error server request response latency cache "
    "database index query vector search ranking result summary report quarter revenue growth "
    "market product feature release version update security patch network storage memory "
    "processor battery screen camera weather river mountain city village harbour school "
    "teacher student library museum history science energy climate forest ocean island "
    "travel train flight hotel dinner recipe garden season morning evening quickly carefully "
    "often never always because although while after before during without within between "
    "is was will can should must might has had does explains describes shows requires"
).split()


def make_sentences(n: int, words: int = 31, seed: int = 7) -> list[str]:
    """``n`` distinct pseudo-sentences of ``words`` words (deterministic)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        body = " ".join(rng.choice(_WORDS) for _ in range(words))
        s = body[0].upper() + body[1:] + "."
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def measure(emb: MiniLMEmbedder, sentences: list[str], repeats: int) -> tuple[float, float]:
    """(best sentences/s wall-clock, sentences per CPU-second of this process), memo off."""
    emb.embed_sync(sentences[: emb.batch_size])  # load model and tokenizer, warm up
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        emb.embed_sync(sentences)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return len(sentences) / min(walls), len(sentences) / min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    sentences = make_sentences(args.sentences)
    probe = MiniLMEmbedder(memo_size=0)
    tokens = [len(w) for ws in probe._windows_of(sentences) for w in ws]
    cpus = probe.threads  # default: usable CPUs
    print(
        f"{len(sentences)} sentences, {statistics.mean(len(s.split()) for s in sentences):.0f} "
        f"words, {statistics.mean(tokens):.1f} word pieces each (incl. [CLS]/[SEP]); "
        f"{cpus} usable CPUs; {load_average()}"
    )
    configs = [(32, cpus), (8, cpus), (64, cpus), (32, 1)]
    print(f"{'batch':>5} {'threads':>7} {'sent/s':>8} {'sent/cpu-s':>10} {'vs ref 285/s':>13}")
    for batch, threads in configs:
        emb = MiniLMEmbedder(batch_size=batch, threads=threads, memo_size=0)
        rate, per_cpu = measure(emb, sentences, args.repeats)
        ratio = rate / REFERENCE_PER_S
        print(f"{batch:>5} {threads:>7} {rate:>8.0f} {per_cpu:>10.0f} {ratio:>12.2f}x")
    memo = MiniLMEmbedder()
    memo.embed_sync(sentences)
    t0 = time.perf_counter()
    memo.embed_sync(sentences)
    print(f"after: {load_average()}")
    print(f"memo hit (all {len(sentences)} seen before): {time.perf_counter() - t0:.4f} s")


if __name__ == "__main__":
    main()
