"""Shared pieces of the engine benchmarks: sessions, a fake judge server, timing, tables.

The FakeOpenAIServer runs in a child process, so the benchmark process's CPU time and
memory are the client's alone (the server's handler threads would otherwise share its GIL
and its ``ru_maxrss``). The server's counters are read over a pipe.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import resource
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from contextlens import Context
from contextlens.runner import evaluate
from contextlens.schemas import Batch, Dataset

_TOPICS = (
    "refunds",
    "shipping",
    "warranty",
    "passwords",
    "invoices",
    "returns",
    "subscriptions",
    "gift cards",
)


def make_sessions(n_sessions: int, per_session: int, tag: str = "") -> list[Dataset]:
    """``n_sessions`` sessions of ``per_session`` interactions; every prompt is distinct."""
    sessions = []
    for s in range(n_sessions):
        topic = _TOPICS[s % len(_TOPICS)]
        context = (
            f"You are the support assistant of store #{s}{tag}. Only answer questions about "
            f"{topic}. Orders over {20 + s % 80} EUR ship free; refunds take {3 + s % 9} days. "
            "Never promise anything the policy does not say, and be polite and brief."
        )
        conversation = [
            Batch(
                qa_id=f"q{i}",
                query=f"Question {i} of customer {s}{tag}: how do {topic} work for order {s}-{i}?",
                assistant=(
                    f"For order {s}-{i}, {topic} follow our policy: orders over "
                    f"{20 + s % 80} EUR ship free and refunds take {3 + s % 9} days."
                ),
                ground_truth_assistant=f"Order {s}-{i}: see the {topic} policy above.",
            )
            for i in range(per_session)
        ]
        sessions.append(
            Dataset(
                session_id=f"s{s:05d}{tag}",
                assistant_id="bench",
                context=context,
                conversation=conversation,
            )
        )
    return sessions


def fenced_reply(request: dict[str, Any]) -> str:
    """A valid Context verdict in a ```json fence; the score depends on the prompt."""
    digest = hashlib.blake2b(repr(request.get("messages")).encode(), digest_size=2).digest()
    score = (digest[0] % 6) / 5
    return f'```json\n{{"reason": "follows the context", "score": {score:.1f}}}\n```'


def _serve(conn: Any, options: dict[str, Any]) -> None:
    """Child process: run the server and answer "stats", "reset", ("set", {attr: value}) and
    ("restart", seconds down) until "stop"."""
    from contextlens.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(reply=fenced_reply, **options) as server:
        conn.send(server.port)
        while (command := conn.recv()) != "stop":
            if command == "reset":
                server.reset()
            elif isinstance(command, tuple) and command[0] == "set":
                for name, value in command[1].items():
                    setattr(server, name, value)
            elif isinstance(command, tuple) and command[0] == "restart":
                server.stop()  # drops the calls in flight, then refuses new connections
                time.sleep(command[1])
                server.start()  # on the same port
            usage = resource.getrusage(resource.RUSAGE_SELF)
            conn.send(
                {
                    "calls": server.calls,
                    "peak_in_flight": server.peak_in_flight,
                    "status_counts": dict(server.status_counts),
                    "prompt_tokens": server.prompt_tokens,
                    "reasks": _distinct_reasks(server.requests),
                    "cpu_s": usage.ru_utime + usage.ru_stime,
                }
            )
    conn.send(None)


def _distinct_reasks(requests: list[dict[str, Any]]) -> int:
    """Distinct re-ask prompts received (a re-ask carries the judge's bad reply as an
    assistant message; a retried re-ask is the same prompt, counted once)."""
    seen = {
        json.dumps(r["messages"])
        for r in requests
        if any(m.get("role") == "assistant" for m in r.get("messages", []))
    }
    return len(seen)


class RemoteServer:
    """A :class:`FakeOpenAIServer` in a child process. ``options`` go to its constructor."""

    def __init__(self, **options: Any) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, options), daemon=True)
        self._proc.start()
        self.port: int = self._conn.recv()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        self._conn.send("stats")
        return self._conn.recv()

    def reset(self) -> dict[str, Any]:
        self._conn.send("reset")
        return self._conn.recv()

    def restart(self, down: float) -> dict[str, Any]:
        """Stop the server, keep it down for ``down`` seconds, start it again on its port."""
        self._conn.send(("restart", down))
        return self._conn.recv()

    def set(self, **attrs: Any) -> dict[str, Any]:
        """Change the server's settings (e.g. ``fail_429_rate``) while it serves."""
        self._conn.send(("set", attrs))
        return self._conn.recv()

    def stop(self) -> None:
        if self._proc.is_alive():
            self._conn.send("stop")
            self._conn.recv()
            self._proc.join(timeout=10)

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass
class Timed:
    run: Any  # EvalRun
    wall_s: float
    cpu_s: float  # CPU time of this (client) process, all threads, user + system


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib() -> float:
    """High-water mark of this process's resident set size (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed_evaluate(sessions: list[Dataset], judge: str, **kwargs: Any) -> Timed:
    """``evaluate(sessions, [Context()], judge=judge, progress=False, **kwargs)``, timed."""
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    run = evaluate(sessions, [Context()], judge=judge, progress=False, **kwargs)
    return Timed(run, time.perf_counter() - t0, cpu_seconds() - cpu0)


def header(title: str) -> None:
    """The exact command line, the title and the load average."""
    print("$ " + shlex.join(sys.orig_argv))
    print(title)
    print(load_average())
    print()


def load_average() -> str:
    """The machine's load average: other work on the 2 cores skews every timing."""
    return "load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def ray_cpu(tag: bytes) -> float:
    """CPU seconds used so far by the processes whose command line holds ``tag`` (a Ray
    actor's is ``ray::CLASS``; Linux)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or tag not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [headers, *[[_fmt(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print(
            "  ".join(
                v.rjust(w) if n and i else v.ljust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)
