import asyncio
import threading

import numpy as np
import pytest

from contextlens.embeddings.batching import Coalescer
from contextlens.embeddings.minilm import MiniLMEmbedder


class Kernel:
    """A blocking kernel that records its runs and how many overlap."""

    def __init__(self, fail_on: str | None = None, seconds: float = 0.02) -> None:
        self.runs: list[list[str]] = []
        self.fail_on = fail_on
        self.seconds = seconds
        self.active = self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.runs.append(list(texts))
        try:
            threading.Event().wait(self.seconds)
            if self.fail_on in texts:
                raise RuntimeError(f"cannot embed {self.fail_on!r}")
            return np.array([[float(len(t)), float(ord(t[0]))] for t in texts], np.float32)
        finally:
            with self._lock:
                self.active -= 1


def threaded(kernel: Kernel):
    """The kernel as the coalescer's run: in a worker thread, as the embedders run theirs."""
    return lambda texts: asyncio.to_thread(kernel, texts)


def expected(texts: list[str]) -> np.ndarray:
    return np.array([[float(len(t)), float(ord(t[0]))] for t in texts], np.float32)


async def test_concurrent_requests_share_runs_one_at_a_time_and_get_their_own_rows():
    kernel = Kernel()
    coalescer = Coalescer(threaded(kernel))
    requests = [[f"text {i}", "shared", f"item {i} again"] for i in range(50)]
    outs = await asyncio.gather(*(coalescer.embed(r) for r in requests))
    for request, out in zip(requests, outs, strict=True):
        np.testing.assert_array_equal(out, expected(request))
    assert len(kernel.runs) < 5  # 50 requests, a handful of runs
    assert kernel.peak == 1
    assert sum(run.count("shared") for run in kernel.runs) == len(kernel.runs)  # deduplicated


async def test_a_batch_takes_at_most_max_texts_and_the_model_never_gets_more():
    kernel = Kernel()
    coalescer = Coalescer(threaded(kernel), max_texts=10)
    requests = [[f"{i}-{j}" for j in range(4)] for i in range(6)]
    requests.append([f"big {j}" for j in range(15)])
    outs = await asyncio.gather(*(coalescer.embed(r) for r in requests))
    # Requests are batched whole (8 + 8 + 8 texts); the one larger than max_texts is its own
    # batch, sent to the model 10 texts at a time.
    assert [len(run) for run in kernel.runs] == [8, 8, 8, 10, 5]
    for request, out in zip(requests, outs, strict=True):
        np.testing.assert_array_equal(out, expected(request))


async def test_repeated_texts_count_once_and_a_memo_spares_them_across_batches():
    kernel = Kernel()
    coalescer = Coalescer(threaded(kernel), max_texts=3, memo=100)
    requests = [["shared", f"own {i}"] for i in range(6)]
    outs = await asyncio.gather(*(coalescer.embed(r) for r in requests))
    embedded = [t for run in kernel.runs for t in run]
    assert sorted(embedded) == sorted(["shared"] + [f"own {i}" for i in range(6)])
    assert all(len(run) <= 3 for run in kernel.runs)
    for request, out in zip(requests, outs, strict=True):
        np.testing.assert_array_equal(out, expected(request))


async def test_a_failing_run_fails_its_callers_and_later_runs_still_work():
    kernel = Kernel(fail_on="poison")
    coalescer = Coalescer(threaded(kernel))
    first = await asyncio.gather(
        coalescer.embed(["fine"]), coalescer.embed(["poison"]), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) and "poison" in str(r) for r in first)
    np.testing.assert_array_equal(await coalescer.embed(["later"]), expected(["later"]))


async def test_a_cancelled_caller_does_not_disturb_the_others():
    kernel = Kernel(seconds=0.05)
    coalescer = Coalescer(threaded(kernel))
    doomed = asyncio.create_task(coalescer.embed(["doomed"]))
    kept = asyncio.create_task(coalescer.embed(["kept"]))
    await asyncio.sleep(0.01)
    doomed.cancel()
    np.testing.assert_array_equal(await kept, expected(["kept"]))
    with pytest.raises(asyncio.CancelledError):
        await doomed


async def test_minilm_coalesces_concurrent_calls_and_rejects_bad_input_before_queueing(
    monkeypatch: pytest.MonkeyPatch,
):
    embedder = MiniLMEmbedder(memo_size=0)
    runs: list[int] = []
    real = embedder._embed_uncached

    def counted(texts: list[str]) -> np.ndarray:
        runs.append(len(texts))
        return real(texts)

    monkeypatch.setattr(embedder, "_embed_uncached", counted)
    requests = [[f"sentence number {i}", "a shared sentence"] for i in range(12)]
    outs = await asyncio.gather(*(embedder.embed(r) for r in requests))
    assert len(runs) < 4 and sum(runs) == 13
    np.testing.assert_allclose(outs[3], embedder.embed_sync(requests[3]), atol=1e-6)
    with pytest.raises(TypeError, match="not a single str"):
        await embedder.embed("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        await embedder.embed(["fine", 3])  # type: ignore[list-item]
