"""evaluate(..., executor="ray") on a local Ray cluster started by this module: the same
results as a local run, one rate limit for the cluster, a killed worker, a killed driver."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import ray

from contextlens import ContextPrecision, evaluate
from contextlens.errors import InputError
from contextlens.results import EvalRun
from contextlens.runner import resolve_executor
from contextlens.scale.ray import SHARDS, RayExecutor, evaluate_dataset
from contextlens.testing import FakeOpenAIServer

# Ray Data warns of its own deprecated settings when it first makes a dataset.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.*")


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module (starting one costs seconds)."""
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield context.address_info["gcs_address"]
    ray.shutdown()


def scored_reply(request: dict) -> str:
    """A judge whose score depends on the prompt only, whatever the order of the calls."""
    digest = hashlib.sha256(request["messages"][-1]["content"].encode()).hexdigest()
    return json.dumps({"reason": f"r{digest[:4]}", "score": int(digest[:6], 16) % 101 / 100})


def make_cases(n: int) -> list[dict]:
    cases = [
        {
            "input": f"When does refund {i} arrive?",
            "actual_output": f"Refund {i} arrives within {i % 9 + 1} days.",
            "expected_output": f"Within {i % 7 + 1} business days.",
            "retrieval_context": [f"Refunds take {i % 7 + 1} business days.", "Shipping is free."],
        }
        for i in range(n)
    ]
    for i, case in enumerate(cases):
        if i % 5:  # every fifth case unnamed: it gets the id a local run gives it
            case["name"] = f"c{i}"
    return cases


def items(run) -> list[tuple]:
    return [(i.case_id, i.metric, i.score, i.reason, i.error) for i in run.iter_results()]


def figures(run) -> dict:
    return {
        name: (
            s.mean,
            s.ci_low,
            s.ci_high,
            s.n,
            s.n_failed,
            s.judge,
            s.accounting.calls if s.accounting else None,
        )
        for name, s in run.summaries.items()
    }


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_ray_run_gives_the_results_of_a_local_run(cluster, tmp_path):
    cases = make_cases(60)
    metrics = ["context-precision", "context-similarity"]  # a judge's and the embedder's
    with FakeOpenAIServer(reply=scored_reply, latency=0.01) as server:
        judge = f"{server.base_url}#judge"
        local = evaluate(cases, metrics, judge=judge, cache=False, progress=False)
        executor = RayExecutor(num_workers=2, batch_size=8)
        run = evaluate(
            cases,
            metrics,
            judge=judge,
            cache=False,
            progress=False,
            out=tmp_path,
            keep_results=True,
            executor=executor,
        )
    assert items(run) == items(local)
    assert figures(run) == figures(local)
    assert run.summaries["context-precision"].ci_low < run.summaries["context-precision"].mean
    timing = {"seconds"}  # the calls' latency, added up: a measurement, not a count
    assert {k: v for k, v in run.accounting.total.model_dump().items() if k not in timing} == {
        k: v for k, v in local.accounting.total.model_dump().items() if k not in timing
    }
    assert (run.judge, run.embedder, run.repeats) == (local.judge, local.embedder, 1)
    folder = Path(run.out_dir)
    written = lines(folder / "results.jsonl")
    assert sorted((r["case_id"], r["metric"]) for r in written) == sorted(
        (i[0], i[1]) for i in items(local)
    )
    assert not (folder / SHARDS).exists()
    assert (tmp_path / "latest").resolve() == folder.resolve()
    assert sorted(run.cases()) == sorted(local.cases())  # cases.jsonl, as a local run's
    assert run.data_fingerprint == local.data_fingerprint is not None
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert (
        summary["summaries"]["context-precision"]["mean"]
        == local.summaries["context-precision"].mean
    )
    assert executor.workers == []  # stopped when the run ended


def test_a_dataset_is_read_in_blocks_and_scored_alike(cluster):
    cases = make_cases(40)
    local = evaluate(cases, ["context-similarity"], cache=False, progress=False)
    ds = ray.data.from_items(cases, override_num_blocks=4)
    run = evaluate_dataset(
        ds,
        ["context-similarity"],
        executor=RayExecutor(num_workers=2, batch_size=16),
        cache=False,
        progress=False,
    )
    assert items(run) == items(local)
    assert figures(run) == figures(local)


def test_the_command_runs_on_the_cluster(cluster, tmp_path, run_cli):
    cases = make_cases(12)
    data = tmp_path / "cases.jsonl"
    rows = [{("id" if k == "name" else k): v for k, v in c.items()} for c in cases]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    local = evaluate(cases, ["context-similarity"], cache=False, progress=False)
    code, output = run_cli(
        "run", data, "-m", "context-similarity", "--out", tmp_path / "out", "--no-store"
    )
    assert code == 0, output
    code, output = run_cli(
        "run",
        data,
        "-m",
        "context-similarity",
        "--out",
        tmp_path / "ray",
        "--no-store",
        "--cache",
        "off",
        "--ray",
        "auto",
        "-q",
    )
    assert code == 0, output
    folder = tmp_path / "ray" / "latest"
    assert {r["case_id"]: r["score"] for r in lines(folder / "results.jsonl")} == {
        i[0]: i[2] for i in items(local)
    }
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert (
        summary["summaries"]["context-similarity"]["ci_low"]
        == local.summaries["context-similarity"].ci_low
    )
    assert (folder / "report.html").exists() and not (folder / SHARDS).exists()
    code, output = run_cli("run", data, "-m", "context-similarity", "--no-store", "--ray", " ")
    assert code == 2 and "--ray expects ADDRESS, auto or local" in output


def judged_on_two_workers(
    cases: list, server: FakeOpenAIServer, limit: int
) -> tuple[EvalRun, RayExecutor]:
    """``context-precision`` on two workers in batches of 8, judged by ``server`` with one
    cluster-wide limit of ``limit`` calls in flight; the run and its executor."""
    executor = RayExecutor(num_workers=2, batch_size=8)
    run = evaluate(
        cases,
        ["context-precision"],
        judge=f"{server.base_url}#judge",
        max_concurrency=limit,
        cache=False,
        progress=False,
        executor=executor,
    )
    return run, executor


def test_the_cluster_never_sends_more_calls_at_once_than_the_limit(cluster):
    cases = make_cases(80)
    with FakeOpenAIServer(reply=scored_reply, latency=0.05, max_in_flight=3) as server:
        run, executor = judged_on_two_workers(cases, server, limit=3)
        # Two workers, each with cases enough in flight to fill the limit alone, and the
        # server rejects any call over 3 at once: none was rejected, so none was over.
        assert server.status_counts == {200: 80}
        assert server.peak_in_flight == 3
    (limits,) = executor.limits.values()
    assert limits["peak"] == 3 and limits["limit"] == 3 and limits["rate_limited"] == 0
    assert run.summaries["context-precision"].n_failed == 0
    # a slot is leased by a worker and kept for its next calls, not asked for per call
    assert limits["leases"] <= len(cases) // 4


def test_a_rate_limit_lowers_the_one_limit_of_the_cluster(cluster):
    cases = make_cases(60)
    with FakeOpenAIServer(
        reply=scored_reply, latency=0.02, fail_429_rate=0.15, retry_after="0.01"
    ) as server:
        run, executor = judged_on_two_workers(cases, server, limit=8)
        rejected = server.status_counts.get(429, 0)
    (limits,) = executor.limits.values()
    assert rejected > 0
    assert limits["rate_limited"] == rejected  # every worker's 429s reached the one limiter
    assert limits["lowest"] < 8  # ...which backed off for the whole cluster
    assert run.summaries["context-precision"].n_failed == 0
    assert run.summaries["context-precision"].accounting.retries == rejected


def test_a_killed_worker_has_its_batch_redone_without_duplicates(cluster, tmp_path):
    cases = make_cases(100)
    with FakeOpenAIServer(reply=scored_reply, latency=0.05) as server:
        judge = f"{server.base_url}#judge"
        local = evaluate(cases, ["context-precision"], judge=judge, cache=False, progress=False)
        server.reset()
        executor = RayExecutor(num_workers=2, batch_size=10)
        killed: list[int] = []
        stop = threading.Event()

        def kill_a_worker() -> None:
            # a worker in the middle of a batch: some of its ten results are written already
            while not stop.is_set() and not (busy := _writing(tmp_path, most=6)):
                time.sleep(0.002)
            if stop.is_set():
                return
            os.kill(busy[0], signal.SIGKILL)  # the worker dies; Ray restarts it
            killed.append(busy[0])

        killer = threading.Thread(target=kill_a_worker)
        killer.start()
        try:
            run = evaluate(
                cases,
                ["context-precision"],
                judge=judge,
                max_concurrency=4,
                cache=False,
                progress=False,
                out=tmp_path,
                executor=executor,
            )
        finally:
            stop.set()
            killer.join()
        calls = server.calls
    assert killed
    assert calls > len(cases)  # what the killed worker had asked was asked again
    written = lines(Path(run.out_dir) / "results.jsonl")
    assert len(written) == len(cases) == len({r["case_id"] for r in written})
    assert len(lines(Path(run.out_dir) / "cases.jsonl")) == len(cases)  # each case once
    assert run.data_fingerprint == local.data_fingerprint
    assert sorted(items(run)) == sorted(items(local))
    assert figures(run)["context-precision"][:5] == figures(local)["context-precision"][:5]
    assert run.summaries["context-precision"].n_failed == 0


def _writing(out: Path, most: int) -> list[int]:
    """The pids of the workers writing an unfinished batch that has results already, but
    no more than ``most``."""
    return [
        int(f.parent.name.split(".part-")[1].split("-")[0])
        for f in out.glob(f"*/{SHARDS}/*.part-*/results.jsonl")
        if 0 < len(f.read_bytes().splitlines()) <= most
    ]


DRIVER = """
import json, sys
import ray
from contextlens import ContextPrecision, evaluate
from contextlens.scale.ray import RayExecutor

address, url, cases_file, out = sys.argv[1:5]
ray.init(address=address, log_to_driver=False)
evaluate(
    json.load(open(cases_file)),
    ["context-precision"],
    judge=url,
    max_concurrency=4,
    cache=False,
    progress=False,
    out=out,
    executor=RayExecutor(num_workers=2, batch_size=10),
)
"""


def test_a_run_whose_driver_was_killed_resumes_with_the_cases_left(cluster, tmp_path):
    cases = make_cases(120)
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER), encoding="utf-8")
    out = tmp_path / "out"
    with FakeOpenAIServer(reply=scored_reply, latency=0.1) as server:
        judge = f"{server.base_url}#judge"
        driver = subprocess.Popen(
            [sys.executable, tmp_path / "driver.py", cluster, judge, tmp_path / "cases.json", out],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and _written(out) < 30:
                assert driver.poll() is None, driver.stderr.read().decode()
                time.sleep(0.05)
        finally:
            os.kill(driver.pid, signal.SIGKILL)
            driver.wait()
        (folder,) = [p for p in out.iterdir() if p.is_dir()]
        assert not (folder / "summary.json").exists()
        time.sleep(1.0)  # the dead driver's workers are stopped by Ray
        before = _finished_cases(folder)
        assert 30 <= len(before) < len(cases)
        server.reset()
        run = evaluate(
            cases,
            ["context-precision"],
            judge=judge,
            max_concurrency=4,
            cache=False,
            progress=False,
            out=out,
            executor=RayExecutor(num_workers=2, batch_size=10, resume=folder),
        )
        redone = server.calls
        server.reset()
        local = evaluate(cases, ["context-precision"], judge=judge, cache=False, progress=False)
    assert redone == len(cases) - len(before)  # only the cases with no result
    assert run.run_id == folder.name and Path(run.out_dir) == folder
    written = lines(folder / "results.jsonl")
    assert len(written) == len(cases) == len({r["case_id"] for r in written})
    assert len(lines(folder / "cases.jsonl")) == len(cases)  # each case once, resumed or not
    assert run.data_fingerprint == local.data_fingerprint
    assert sorted(items(run)) == sorted(items(local))
    assert figures(run)["context-precision"][:5] == figures(local)["context-precision"][:5]
    assert not (folder / SHARDS).exists() and (out / "latest").resolve() == folder.resolve()
    with pytest.raises(InputError, match="has completed"):
        evaluate(cases, ["context-precision"], out=out, executor=RayExecutor(resume=folder))


def _written(out: Path) -> int:
    """Lines the run in ``out`` has written so far, shards included."""
    return sum(1 for _ in out.glob("*/results.jsonl") for _ in _.open()) + sum(
        1 for f in out.glob(f"*/{SHARDS}/*/results.jsonl") for _ in f.open()
    )


def _finished_cases(folder: Path) -> set[str]:
    """Cases with a result on disk: whole lines of results.jsonl and of every shard."""
    found = set()
    for path in [folder / "results.jsonl", *folder.glob(f"{SHARDS}/*/results.jsonl")]:
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
                if line.endswith("\n"):
                    found.add(json.loads(line)["case_id"])
    return found


def test_bad_settings_are_refused_with_their_reason(tmp_path):
    with pytest.raises(ValueError, match="unknown executor 'spark'"):
        evaluate([], ["context"], executor="spark")
    assert isinstance(resolve_executor("ray"), RayExecutor)
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        RayExecutor(num_workers=0)
    with pytest.raises(InputError, match="no such run folder"):
        evaluate([], ["context"], executor=RayExecutor(resume=tmp_path / "nope"))
    with pytest.raises(TypeError, match="metric 'context-precision' cannot be sent"):
        evaluate([], [ContextPrecision(model="http://127.0.0.1:9/v1#m")], executor="ray")
    with pytest.raises(TypeError, match=r"expected a ray\.data\.Dataset"):
        evaluate_dataset([{"input": "x"}], ["context-similarity"])
