"""SIGTERM stops ``contextlens run`` on its own, as Ctrl-C does, also where SIGINT is ignored
(a command started with ``&`` by a script, under nohup, by many CI runners); and
:func:`contextlens.sync.interrupt`, what it calls, stops a coroutine run from sync code."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from contextlens.store import RunStore
from contextlens.sync import interrupt, run_sync
from contextlens.testing import FakeOpenAIServer

PRECISION = json.dumps({"reason": "Matches.", "score": 0.8})
CASES = 200


def cases(path: Path) -> Path:
    rows = (
        {
            "id": f"c{i}",
            "input": f"When do you open on day {i}?",
            "actual_output": "At 9 am.",
            "expected_output": "9 am.",
            "retrieval_context": ["We open at 9 am."],
        }
        for i in range(CASES)
    )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def ignore_sigint() -> None:
    """What ``cmd &`` in a script does to the command: SIGINT ignored, inherited by exec."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals and preexec_fn")
def test_sigterm_stops_a_run_whose_sigint_is_ignored(tmp_path: Path) -> None:
    data = cases(tmp_path / "cases.jsonl")
    store, out = tmp_path / "runs.sqlite3", tmp_path / "out"
    with FakeOpenAIServer(reply=lambda r: PRECISION, latency=0.2) as server:
        command = [sys.executable, "-m", "contextlens", "run", str(data), "-m"]
        command += ["context-precision", "--judge", f"{server.base_url}#m", "--out", str(out)]
        command += ["--store", str(store), "-q"]
        env = {**os.environ, "CONTEXTLENS_CACHE": "off"}
        process = subprocess.Popen(
            command, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint
        )
        try:
            deadline = time.monotonic() + 60
            while server.calls < 3 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            assert process.poll() is None, "the run ended before it could be stopped"
            sent = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        took = time.monotonic() - sent
    assert process.returncode == 143, stderr  # the documented status of a SIGTERM
    assert took < 15, f"{took:.1f}s from SIGTERM to the end"
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr
    [info] = RunStore(store).list_runs()
    assert info.status == "interrupted" and info.error == "stopped by SIGTERM"
    [folder] = [p for p in out.iterdir() if p.is_dir() and p.name != "latest"]
    text = (folder / "results.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert text.endswith("\n") and all(json.loads(x)["metric"] for x in lines)  # whole lines
    assert 0 < len(lines) < CASES  # what was under way was written; the rest never started
    assert not (folder / "summary.json").exists()  # it does not claim to be complete
    shown = subprocess.run(
        [sys.executable, "-m", "contextlens", "runs", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "status interrupted" in shown.stdout and f"resume {info.run_id}" in shown.stdout


def test_interrupt_stops_a_coroutine_as_ctrl_c_does() -> None:
    finished: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            finished.append("its finally ran")

    threading.Timer(0.2, interrupt).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_sync(work())
    assert time.monotonic() - started < 10 and finished == ["its finally ran"]
    assert interrupt() is False  # nothing is running now


async def test_interrupt_reaches_a_run_inside_a_running_loop() -> None:
    async def work() -> str:
        await asyncio.sleep(60)
        return "never"

    threading.Timer(0.2, interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        run_sync(work())  # on a loop of its own, in a worker thread
