"""The run report's memory at scale: peak RSS of writing ``report.html`` for a run folder of
10,000 to 1,000,000 cases.

Run: .venv/bin/python benchmarks/bench_report_memory.py [--cases 10000 100000 1000000]

A template of 200 cases is scored offline (faithfulness with its claims, and retrieval with
its ranked ids, each case with three chunks and ``meta``); its case and result lines are
repeated under new case ids into a run folder of each size (the summary is the template's:
the page's figures come from the items). Each report is then written in a fresh process,
which prints its peak resident set size (``ru_maxrss``), the seconds it took and the page's
size. The target: 1,000,000 cases within 1 GB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from contextlens import ModelTestCase, evaluate

TEMPLATE = 200
DOMAINS = ("billing", "shipping", "returns", "hours")

CHILD = """
import json, resource, sys, time
from pathlib import Path
from contextlens.results import EvalRun
from contextlens.report import write_report
folder = Path(sys.argv[1])
started = time.perf_counter()
page = write_report(EvalRun.from_folder(folder), folder / "report.html")
took = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"peak_mb": peak, "seconds": took, "page_mb": page.stat().st_size / 1e6}))
"""


def case(i: int) -> ModelTestCase:
    domain = DOMAINS[i % len(DOMAINS)]
    return ModelTestCase(
        name=f"case-{i:05d}",
        input=f"What is the {domain} policy for order {i % 50}?",
        actual_output=f"The {domain} policy allows {i % 30} days. Order {i % 50} ships today.",
        retrieval_context=[
            f"{domain.title()} policy: customers have 30 days.",
            f"Order {i % 50} ships from the warehouse.",
            "Parking is free.",
        ],
        retrieved_ids=[f"{domain}-1", f"order-{i % 50}", "parking"],
        relevant_ids=[f"{domain}-1"],
        meta={"domain": domain, "channel": "chat" if i % 3 else "email", "ticket": f"T-{i}"},
    )


def template(folder: Path) -> Path:
    run = evaluate(
        [case(i) for i in range(TEMPLATE)],
        ["faithfulness", "retrieval"],
        out=str(folder),
        cache="off",
        progress=False,
    )
    assert run.out_dir is not None
    return Path(run.out_dir)


def grow(source: Path, target: Path, n: int) -> None:
    """``target``: the run folder ``source`` with its cases repeated to ``n``."""
    target.mkdir(parents=True)
    shutil.copy(source / "summary.json", target / "summary.json")
    cases = [json.loads(line) for line in (source / "cases.jsonl").open(encoding="utf-8")]
    results: dict[str, list[dict]] = {}
    for line in (source / "results.jsonl").open(encoding="utf-8"):
        item = json.loads(line)
        results.setdefault(item["case_id"], []).append(item)
    with (
        (target / "cases.jsonl").open("w", encoding="utf-8") as case_file,
        (target / "results.jsonl").open("w", encoding="utf-8") as result_file,
    ):
        for i in range(n):
            record = cases[i % len(cases)]
            new_id = f"c{i:07d}"
            for item in results.get(record["case_id"], []):
                result_file.write(json.dumps({**item, "case_id": new_id}) + "\n")
            case_file.write(json.dumps({**record, "case_id": new_id}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cl-bench-report-memory-") as tmp:
        source = template(Path(tmp) / "template")
        print(f"{'cases':>10} {'peak RSS MB':>12} {'seconds':>8} {'page MB':>8}")
        for n in args.cases:
            folder = Path(tmp) / f"run-{n}"
            grow(source, folder, n)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder)],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                print(f"{n:>10,} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            got = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{n:>10,} {got['peak_mb']:>12.0f} {got['seconds']:>8.1f} {got['page_mb']:>8.0f}")
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
