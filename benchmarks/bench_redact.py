"""Time of the secret mask on 1 MB texts of hostile and ordinary shapes.

Run: .venv/bin/python benchmarks/bench_redact.py [--size 1048576] [--random 300] [--seed 0]

Each shape is a short motif repeated to ``--size`` characters (an ``authorization:`` then
spaces, long dotted and hyphenated words, a URL without user-info, prose, headers packed end
to end), plus ``--random`` motifs drawn from the pieces the patterns look for (header names,
``://``, ``?token=``, quotes, backslashes, spaces, dots, hyphens). Printed: each named shape's
time (the best of 3 calls of :func:`contextlens.redact.redact`), how many values the patterns
found to mask in it, then the slowest random motifs, and the budget: under 50 ms for 1 MB of
text with fewer than 10,000 values to mask. Each value costs about a microsecond more, so a
text packed with secrets end to end takes longer, still in time linear in its length.
"""

from __future__ import annotations

import argparse
import random
import time

from _workload import header, print_table

from contextlens.redact import _ASCII_LOWER, _spans, redact

BUDGET_MS = 50.0

#: Pieces the patterns react to, and the characters that end or extend their values.
PIECES = [
    "authorization", "Proxy-Authorization", "api-key", "x-api-key", "bearer", "Basic", "token",
    "://", "http", "@", "?", "&", ";", "=", ":", "?token=", "&api_key=", " ", "  ", "\t",
    "\n", ".", "-", "_", "a", "Z", "9", '"', "'", "\\", '\\"', "/", ",", "}", "]", "\u0130",
    "client_secret=", "X-Amz-Signature=", "%5F", "password=", "Secret", "-token", "-key",
    "cookie:", "Cookie: a=", "//", "u:p@", "monkey=",
]  # fmt: skip

SHAPES = {
    "authorization: then spaces": ("authorization:", " "),
    "authorization: quote, spaces": ('Authorization: "', " "),
    "dotted word": ("", "a."),
    "hyphenated word": ("", "a-"),
    "dotted, hyphenated, no ://": ("", "ab.c-d+"),
    "URL without user-info": ("http://", "x"),
    "schemes end to end": ("", "a://"),
    "bearer then spaces": ("bearer", " "),
    "api-key then spaces": ("api-key", " "),
    "prose": ("", "The shop opens at 9 am on weekdays. "),
    "JSON of a chunk": ("", '{"text": "see https://docs.example.com/a-b.c?q=1", "n": 3}, '),
    "U+0130 and a header": ("", "\u0130 Authorization: Basic "),
    "headers end to end": ("", "Authorization: Bearer sk-0123456789 "),
    "query secrets end to end": ("", "?key=v"),
    "= after a secret word": ("", "a_token="),
    "words ending in key, =": ("", "monkey=3 "),
    "user-info, @ then no host": ("https://", "u:p@"),
    "protocol-relative, no @": ("", " //u:p"),
    "cookies end to end": ("Cookie: ", "a=1; "),
    "headers named *-token": ("", "X-Auth-Token: abc "),
    "hyphens, then -token": ("", "a-token-"),
}


def text_of(prefix: str, motif: str, size: int) -> str:
    return prefix + motif * max(1, (size - len(prefix)) // max(1, len(motif)))


def values_in(text: str) -> int:
    """How many values the patterns find to mask (overlapping ones are masked as one)."""
    return len(_spans(text, text.translate(_ASCII_LOWER)))


def best_ms(text: str, calls: int = 3) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        redact(text)
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--random", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    header(f"secret mask on {args.size:,} characters")
    rows = []
    for name, (prefix, motif) in SHAPES.items():
        text = text_of(prefix, motif, args.size)
        rows.append([name, best_ms(text), values_in(text)])
    print_table(["shape", "ms", "values"], rows)
    rng = random.Random(args.seed)
    found = []
    for _ in range(args.random):
        motif = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
        text = text_of("", motif, args.size)
        found.append([repr(motif)[:60], best_ms(text, 1), values_in(text)])
    found.sort(key=lambda row: -row[1])
    print(f"the slowest of {args.random} random motifs (one call each):")
    print_table(["motif", "ms", "values"], found[:8])
    quiet = [r for r in rows + found if r[2] < 10_000]
    worst = max(quiet, key=lambda row: row[1])
    dense = max(rows + found, key=lambda row: row[1] / max(row[2], 1) if row[2] >= 10_000 else 0)
    print(f"budget: under {BUDGET_MS:.0f} ms for text with fewer than 10,000 values to mask")
    print(f"slowest such text: {worst[0]} at {worst[1]:.1f} ms")
    if dense[2] >= 10_000:
        each = dense[1] * 1000 / dense[2]
        print(f"packed with values: {dense[0]} at {each:.2f} microseconds a value")


if __name__ == "__main__":
    main()
