"""HTTP client CPU per call: httpx against aiohttp, the same POSTs to the same fake server.

Run: .venv/bin/python benchmarks/bench_transport.py [--calls 2000] [--concurrency 64]
     [--latency 0.2]

Each client sends ``--calls`` chat-completion POSTs (a ~3 KB body, as a judge prompt) to a
FakeOpenAIServer in a child process, at most ``--concurrency`` in flight, and reads the JSON
reply; nothing of contextlens is involved. CPU is this process's user + system time over the
calls, after a warm-up round that opens the connections. httpx is the test extra's; the
OpenAI-compatible backend uses aiohttp for the difference this prints.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _workload import RemoteServer, cpu_seconds, header, load_average, print_table

BODY = {"model": "bench", "messages": [{"role": "user", "content": "x" * 3000}]}

Post = Callable[[], Awaitable[Any]]


async def _timed(post: Post, calls: int, concurrency: int) -> tuple[float, float]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await post()

    await asyncio.gather(*(one() for _ in range(concurrency)))  # warm-up: open connections
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return time.perf_counter() - t0, cpu_seconds() - cpu0


async def run_httpx(url: str, calls: int, concurrency: int) -> tuple[float, float]:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def post() -> Any:
            response = await client.post(url, json=BODY)
            return response.json()

        return await _timed(post, calls, concurrency)


async def run_httpx_sharded(url: str, calls: int, concurrency: int) -> tuple[float, float]:
    """httpx spread over clients of 8 connections each: its pool does work proportional to
    queued requests x connections on every request, so small pools cost less CPU."""
    import httpx

    per = 8
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    clients = [httpx.AsyncClient(timeout=60, limits=limits) for _ in range(-(-concurrency // per))]
    turn = 0
    try:

        async def post() -> Any:
            nonlocal turn
            turn += 1
            response = await clients[turn % len(clients)].post(url, json=BODY)
            return response.json()

        return await _timed(post, calls, concurrency)
    finally:
        for client in clients:
            await client.aclose()


async def run_aiohttp(url: str, calls: int, concurrency: int) -> tuple[float, float]:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def post() -> Any:
            async with session.post(url, json=BODY) as response:
                return await response.json()

        return await _timed(post, calls, concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    header(
        f"{args.calls} POSTs at {args.latency * 1000:.0f} ms, {args.concurrency} in flight, "
        "fake server in a child process"
    )
    ideal = args.calls * args.latency / args.concurrency
    rows = []
    with RemoteServer(latency=args.latency) as server:
        url = f"{server.base_url}/chat/completions"
        for name, run in (
            ("httpx, one client", run_httpx),
            ("httpx, clients of 8", run_httpx_sharded),
            ("aiohttp, one session", run_aiohttp),
        ):
            wall, cpu = asyncio.run(run(url, args.calls, args.concurrency))
            rows.append([name, wall, wall / ideal, cpu, 1000 * cpu / args.calls])
    print_table(["client", "wall s", "x ideal", "CPU s", "CPU ms/call"], rows)
    print(f"ideal wall: calls x latency / concurrency = {ideal:.2f} s")
    print(f"at the end: {load_average()}")


if __name__ == "__main__":
    main()
