"""Ray at scale against a fake judge: throughput per worker from 1 to 4 workers, and a long
run with garbage replies and a killed worker that must lose and duplicate nothing.

Run: .venv/bin/python benchmarks/bench_ray_scale.py scaling [--workers 1 2 3 4]
         [--latency 1.0] [--batch 32] [--per-worker 1500]
     .venv/bin/python benchmarks/bench_ray_scale.py soak [--items 1000000] [--workers 2]
         [--garbage 0.01] [--kill-at 0.3] [--out DIR] [--resume]

The judge is a chat backend in the workers' own processes (no HTTP server to share the two
cores with): it answers every reply schema with its smallest valid instance after
``--latency`` seconds, so a run's speed is the engine's and Ray's, not a server's.

* ``scaling``: ``context-precision`` on ``--per-worker`` items per worker, batches of
  ``--batch``, the cluster's judge limit set above what the workers keep in flight (two
  batches each), so each worker can hold ``2 x batch`` calls of ``latency`` seconds: the
  ceiling is ``2 x batch / latency`` items a second per worker. The table gives the steady
  rate (from the first finished batch to the last), the rate per worker against one worker's,
  and the CPU the workers, the permit actor and the driver used.
* ``soak``: ``--items`` items streamed from a generator, no latency, ``--garbage`` of the
  replies not JSON (drawn per case and attempt from a hash, so which items must fail is
  known in advance: those whose reply and re-asked reply were both garbage), one worker
  killed with SIGKILL at ``--kill-at`` of the run (Ray restarts it; its unfinished batches
  are done again). Then ``results.jsonl`` is read back: every item must be there exactly
  once, the failed ones exactly those predicted, each with its reason, and each item's
  attempts those predicted; the run's ledger must count the calls the results account for.
  ``--resume`` goes on with the newest unfinished run in ``--out`` (its driver stopped, as
  by Ctrl-C or SIGKILL): a run of 10 million items can be done in several sittings, and the
  checks then cover the stop too (the ledger then counts the calls of this sitting only).

Other work on the machine skews every timing: the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ["CONTEXTLENS_CACHE"] = "off"

import ray
from _workload import load_average, print_table, ray_cpu
from pydantic import BaseModel

from contextlens import evaluate
from contextlens.backend import ChatBackend, Completion, Message, Usage
from contextlens.scale.ray import RayExecutor
from contextlens.testing.schemas import smallest

METRIC = "context-precision"
WORKER, PERMITS = b"ray::Worker", b"ray::Permits"  # the actors' process titles
_CASE = re.compile(r"refund (\d+) arrive")


def garbage(case: int, attempt: int, share: float) -> bool:
    """Whether the fake judge's reply to ``case``'s ``attempt`` (0: the first, 1: the re-ask)
    is garbage: a hash of the two below ``share``."""
    digest = hashlib.blake2b(f"{case}/{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


class FakeJudge(ChatBackend):
    """Answers after ``latency`` seconds with a valid reply, or with garbage for the
    ``share`` of (case, attempt) that :func:`garbage` picks."""

    name = "fake-judge"

    def __init__(self, latency: float = 0.0, share: float = 0.0) -> None:
        self.model = "fake"
        self.latency = latency
        self.share = share
        self.replies: dict[type[BaseModel] | None, str] = {}

    def valid_reply(self, schema: type[BaseModel] | None) -> str:
        """The smallest reply ``schema`` accepts, as JSON (made once per schema)."""
        if schema not in self.replies:
            tree = schema.model_json_schema() if schema is not None else {}
            self.replies[schema] = json.dumps(smallest(tree, tree.get("$defs", {})))
        return self.replies[schema]

    @property
    def key(self) -> str:
        return f"fake-judge#{self.model}"

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.share:
            found = _CASE.search(messages[1]["content"])
            attempt = 1 if len(messages) > 2 else 0  # a re-ask carries the bad reply
            if found and garbage(int(found[1]), attempt, self.share):
                return Completion("Sorry, I cannot help with that.", Usage(1000, 8), 0.0)
        return Completion(self.valid_reply(schema), Usage(1000, 40), 0.0)


def items(n: int) -> Iterator[dict[str, Any]]:
    """``n`` cases, ``c0`` ... ``c{n-1}``; case ``i`` names refund ``i`` in its input."""
    for i in range(n):
        yield {
            "name": f"c{i}",
            "input": f"When does refund {i} arrive?",
            "actual_output": f"Refund {i} arrives within {i % 9 + 1} days.",
            "expected_output": f"Within {i % 9 + 1} days.",
            "retrieval_context": [f"Refunds take {i % 7 + 1} business days.", "Shipping is free."],
        }


def scaled(workers: int, args: argparse.Namespace) -> dict[str, float]:
    """One run on ``workers`` workers: its steady rate and the CPU each part used."""
    n = workers * args.per_worker
    marks: list[tuple[int, float]] = []
    cpu: list[tuple[float, float]] = []

    def progress(done: int, total: int | None, seconds: float) -> None:
        marks.append((done, seconds))
        if len(marks) == 1 or done == n:  # the actors stop when the run ends: read them before
            cpu.append((ray_cpu(WORKER), ray_cpu(PERMITS), time.process_time()))

    run = evaluate(
        items(n),
        [METRIC],
        judge=FakeJudge(args.latency),
        max_concurrency=4 * workers * args.batch,
        cache=False,
        progress=progress,
        executor=RayExecutor(num_workers=workers, batch_size=args.batch),
    )
    summary = run.summaries[METRIC]
    assert summary.n == n and summary.n_failed == 0, summary
    (first, t_first), (last, t_last) = marks[0], marks[-1]
    (w0, p0, d0), (w1, p1, d1) = cpu[0], cpu[-1]
    steady = last - first  # items done between the two marks, the actors' start left out
    return {
        "items": n,
        "wall": t_last,
        "rate": steady / (t_last - t_first),
        "workers_cpu": (w1 - w0) / steady,
        "permits_cpu": (p1 - p0) / steady,
        "driver_cpu": (d1 - d0) / steady,
    }


def scaling(args: argparse.Namespace) -> None:
    ceiling = 2 * args.batch / args.latency
    runs = []
    for workers in args.workers:
        runs.append((workers, scaled(workers, args)))
        print(f"   {workers} worker(s) done; {load_average()}", flush=True)
    one = runs[0][1]["rate"] / runs[0][0]
    print(
        f"\n-- {METRIC}, fake judge at {1000 * args.latency:.0f} ms, batches of {args.batch}: "
        f"a worker's ceiling is {ceiling:.0f} items/s"
    )
    print_table(
        [
            "workers",
            "items",
            "wall s",
            "steady items/s",
            "per worker",
            f"vs {runs[0][0]} worker",
            "of ceiling",
            "workers' CPU ms/item",
            "permits CPU ms/item",
            "driver CPU ms/item",
        ],
        [
            [
                workers,
                r["items"],
                round(r["wall"], 1),
                round(r["rate"], 1),
                round(r["rate"] / workers, 1),
                f"{r['rate'] / workers / one:.2f}",
                f"{r['rate'] / workers / ceiling:.2f}",
                round(1000 * r["workers_cpu"], 2),
                round(1000 * r["permits_cpu"], 2),
                round(1000 * r["driver_cpu"], 2),
            ]
            for workers, r in runs
        ],
    )


def kill_one_worker() -> int | None:
    """SIGKILL one worker actor's process; its pid, or None if none was found."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and WORKER in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
                return int(proc.name)
        except OSError:
            continue
    return None


def soak(args: argparse.Namespace) -> None:
    n, share = args.items, args.garbage
    out = Path(args.out)
    killed: list[tuple[int, int | None]] = []
    step = max(1, n // 100)
    next_report = [step]

    def progress(done: int, total: int | None, seconds: float) -> None:
        if not killed and done >= args.kill_at * n:
            killed.append((done, kill_one_worker()))
            print(f"   killed worker pid {killed[0][1]} at {done:,} items", flush=True)
        if done >= next_report[0] or done == n:
            next_report[0] += step
            rate = done / seconds if seconds else 0.0
            print(f"   {done:,}/{n:,} in {seconds:,.0f} s ({rate:,.0f}/s); {load_average()}")
            sys.stdout.flush()

    resume = None
    if args.resume:  # the newest run in --out that did not finish (its driver was stopped)
        unfinished = [
            p for p in out.iterdir() if p.is_dir() and not p.is_symlink()
            and not (p / "summary.json").exists()
        ]  # fmt: skip
        resume = max(unfinished, key=lambda p: p.stat().st_mtime)
        print(f"   resuming {resume}", flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    run = evaluate(
        items(n),
        [METRIC],
        judge=FakeJudge(0.0, share),
        max_concurrency=64,
        cache=False,
        out=out,
        progress=progress,
        executor=RayExecutor(num_workers=args.workers, batch_size=args.batch, resume=resume),
    )
    wall, driver = time.perf_counter() - t0, time.process_time() - c0
    folder = Path(run.out_dir)
    print(f"   run done in {wall:,.0f} s (driver CPU {driver:,.0f} s); checking {folder}/")

    seen = bytearray(n)
    lines = duplicates = unknown = failed = wrong_failure = wrong_attempts = no_reason = 0
    attempts_total = 0
    with (folder / "results.jsonl").open("rb") as lines_file:
        for raw in lines_file:
            lines += 1
            line = json.loads(raw)
            name = line["case_id"]
            index = int(name[1:]) if name[:1] == "c" and name[1:].isdigit() else -1
            if not 0 <= index < n or line["metric"] != METRIC:
                unknown += 1
                continue
            if seen[index]:
                duplicates += 1
                continue
            seen[index] = 1
            first, second = garbage(index, 0, share), garbage(index, 1, share)
            expect_fail = first and second
            is_failed = line["error"] is not None
            failed += is_failed
            wrong_failure += is_failed != expect_fail
            if is_failed and not line["error"]:
                no_reason += 1
            attempts = (line.get("details") or {}).get("attempts")
            if not is_failed:
                attempts_total += attempts or 0
                wrong_attempts += attempts != (2 if first else 1)
            else:
                attempts_total += 2
    missing = n - sum(seen)
    expected_failed = sum(garbage(i, 0, share) and garbage(i, 1, share) for i in range(n))
    garbage_first = sum(garbage(i, 0, share) for i in range(n))
    counts = run.accounting.total
    summary = run.summaries[METRIC]
    print(
        f"\n-- soak: {n:,} items, {args.workers} workers, batches of {args.batch}, "
        f"{share:.0%} garbage replies, a worker killed at {killed[0][0] if killed else '-'}"
    )
    print_table(
        ["check", "found", "expected"],
        [
            ["result lines", lines, n],
            ["items missing", missing, 0],
            ["items twice", duplicates, 0],
            ["lines of no case", unknown, 0],
            ["items failed", failed, expected_failed],
            ["failed items not predicted, or predicted and scored", wrong_failure, 0],
            ["failed items without a reason", no_reason, 0],
            ["scored items re-asked (first reply garbage)", garbage_first - expected_failed, ""],
            ["scored items with other attempts than predicted", wrong_attempts, 0],
            [
                "summary n / failed",
                f"{summary.n:,} / {summary.n_failed:,}",
                f"{n:,} / {expected_failed:,}",
            ],
            [
                "judge calls in the ledger" + (" (this sitting)" if resume else ""),
                counts.calls,
                f"<= {attempts_total}" if resume else attempts_total,
            ],
        ],
    )
    print(f"   wall {wall:,.0f} s: {n / wall:,.0f} items/s; {load_average()}")
    ok = (
        lines == n
        and not (missing or duplicates or unknown or wrong_failure or no_reason or wrong_attempts)
        and failed == expected_failed
        and summary.n == n
        and summary.n_failed == expected_failed
        and (counts.calls <= attempts_total if resume else counts.calls == attempts_total)
    )
    print("   nothing lost, nothing twice:", "yes" if ok else "NO")
    if not ok:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    scale = commands.add_parser("scaling")
    scale.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4])
    scale.add_argument("--latency", type=float, default=1.0)
    scale.add_argument("--batch", type=int, default=32)
    scale.add_argument("--per-worker", type=int, default=1500)
    long = commands.add_parser("soak")
    long.add_argument("--items", type=int, default=1_000_000)
    long.add_argument("--workers", type=int, default=2)
    long.add_argument("--batch", type=int, default=2048)
    long.add_argument("--garbage", type=float, default=0.01)
    long.add_argument("--kill-at", type=float, default=0.3)
    long.add_argument("--out", default="/tmp/contextlens-soak")
    long.add_argument("--resume", action="store_true", help="go on with the run --out holds")
    args = parser.parse_args()

    print(f"== bench_ray_scale {args.command}: {os.cpu_count()} CPUs; {load_average()}")
    ray.init(num_cpus=max(os.cpu_count() or 1, 4), include_dashboard=False, log_to_driver=False)
    try:
        scaling(args) if args.command == "scaling" else soak(args)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
