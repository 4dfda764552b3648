"""Start-up time: ``contextlens --version`` and ``--help``, and what ``import contextlens`` costs.

Run: .venv/bin/python benchmarks/bench_startup.py [--src PATH] [--repeats 7]

Each command runs ``--repeats`` times in a fresh ``python -m contextlens`` process; the
table gives the median and the fastest wall time. The import figures come from
``python -X importtime -m contextlens --version`` (the fastest of the repeats): the
cumulative microseconds of ``contextlens`` and ``contextlens.cli``, and whether numpy,
pydantic, aiohttp or onnxruntime were imported at all. ``--src`` runs another source tree
(an older commit's ``src``, from ``git archive``) to compare.

Target: ``--version`` and ``--help`` import none of numpy, pydantic, aiohttp, onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("numpy", "pydantic", "aiohttp", "onnxruntime")
SRC = Path(__file__).resolve().parents[1] / "src"


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "100"}


def wall_times(src: Path, args: list[str], repeats: int) -> list[float]:
    """Seconds of ``python -m contextlens ARGS``, once per repeat."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "contextlens", *args],
            env=_env(src),
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - start)
    return times


def import_profile(src: Path, args: list[str], repeats: int) -> tuple[dict[str, int], set[str]]:
    """The cumulative import microseconds of each top-level ``contextlens`` module (the
    fastest repeat) and which of :data:`HEAVY` were imported."""
    best: dict[str, int] = {}
    loaded: set[str] = set()
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "contextlens", *args],
            env=_env(src),
            check=True,
            capture_output=True,
            text=True,
        )
        for row in done.stderr.splitlines():
            if not row.startswith("import time:") or "|" not in row:
                continue
            _, cumulative, name = (part.strip() for part in row.split("|"))
            if not cumulative.isdigit():
                continue
            if name in ("contextlens", "contextlens.cli"):
                best[name] = min(best.get(name, 10**12), int(cumulative))
            if name in HEAVY:
                loaded.add(name)
    return best, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC, help="the source tree to time")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"source: {args.src}; python {sys.version.split()[0]}; {args.repeats} runs each")
    print(f"{'command':<24} {'median s':>9} {'fastest s':>10}")
    for command in (["--version"], ["--help"]):
        times = wall_times(args.src, command, args.repeats)
        shown = "contextlens " + " ".join(command)
        print(f"{shown:<24} {statistics.median(times):>9.3f} {min(times):>10.3f}")
    failed = False
    for command in (["--version"], ["--help"]):
        best, loaded = import_profile(args.src, command, args.repeats)
        figures = ", ".join(f"{name} {us / 1000:.0f} ms" for name, us in sorted(best.items()))
        print(f"-X importtime {' '.join(command)}: {figures}; heavy: {sorted(loaded) or 'none'}")
        failed = failed or bool(loaded)
    if failed:
        print("target missed: a heavy package is imported at start-up")
        if args.src == SRC:
            sys.exit(1)


if __name__ == "__main__":
    main()
