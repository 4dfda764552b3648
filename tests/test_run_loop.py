"""The run loop on its own: a stream of cases read, scored, counted; a reached cap."""

import asyncio

from contextlens.engine.budget import CostCap
from contextlens.engine.cache import open_cache
from contextlens.runner import CaseChecks, RunConfig, bind_metrics, checked_metrics
from contextlens.runner.loop import RunLoop
from contextlens.schemas import ModelTestCase


def cases(n):
    return [
        ModelTestCase(
            name=f"c{i}",
            input="What are the opening hours?",
            actual_output="We open at 9am.",
            retrieval_context=["The shop opens at 9am and closes at 5pm.", "Parking is free."],
        )
        for i in range(n)
    ]


async def run_loop(stream, *, cap=None, progress=False):
    """A loop of offline context precision over ``stream``, run to its end."""
    config = RunConfig(cache=False, progress=progress)
    bound = bind_metrics(
        checked_metrics(["context-precision"]),
        judge=config.judge,
        embedder=config.embedder,
        cache=open_cache(config.cache),
        limits=config.limits,
    )
    loop = RunLoop(bound, CaseChecks(bound), config, cap=cap, in_flight=2, total=None)
    await loop.run(stream)
    return loop


def test_a_loop_reads_an_async_stream_and_shows_each_case_done():
    async def stream():
        for case in cases(5):
            yield case

    ticks = []
    loop = asyncio.run(run_loop(stream(), progress=lambda done, total, s: ticks.append(done)))
    assert (loop.read, loop.cases_done) == (5, 5)
    assert ticks == sorted(ticks)  # the heartbeat may repeat a count between two cases
    assert [t for t in dict.fromkeys(ticks) if t] == [1, 2, 3, 4, 5]
    run = loop.finish()
    assert (run.summaries["context-precision"].n_scored, run.stopped) == (5, None)
    assert sorted(i.case_id for i in run.iter_results()) == [f"c{i}" for i in range(5)]


def test_a_loop_whose_cap_is_reached_records_every_case_as_not_run():
    cap = CostCap(1.0)
    cap.reached = True
    loop = asyncio.run(run_loop(cases(3), cap=cap))
    assert (loop.read, loop.cases_done) == (3, 0)
    run = loop.finish()
    assert run.stopped == "the cost cap of $1 was reached"
    assert run.summaries["context-precision"].n_not_run == 3
    assert {i.not_run for i in run.iter_results()} == {"not run: the cost cap of $1 was reached"}


def test_a_metrics_time_is_its_wall_time_not_its_items_waits_added_up():
    """Eight cases at once against a judge that takes 0.3 s a call: the metric's time is
    about one call's, within the run's wall time, not the 2.4 s of eight waits."""
    from contextlens.runner import evaluate
    from contextlens.testing import FakeOpenAIServer

    with FakeOpenAIServer(latency=0.3, reply=lambda r: '{"reason": "ok", "score": 1}') as server:
        run = evaluate(
            [c.model_copy(update={"expected_output": "9am"}) for c in cases(8)],
            ["context-precision"],
            judge=f"{server.base_url}#m?concurrency=8",
            max_concurrency=8,
            cache=False,
            progress=False,
        )
    summary = run.summaries["context-precision"]
    waits = summary.accounting.seconds  # every call's latency, added up
    assert summary.n_scored == 8 and waits >= 8 * 0.3
    assert 0.3 <= summary.seconds <= run.duration_s < waits / 2
