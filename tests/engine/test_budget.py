"""The cost cap on its own: a call that does not fit waits for calls in flight to settle and
is refused only when what is spent leaves too little; waiting calls go in a fair order; what
the cap charges without knowing the usage is in the ledger too."""

from __future__ import annotations

import asyncio

import pytest

from contextlens.backend import Usage
from contextlens.engine.accounting import Ledger, PriceTable, attribute
from contextlens.engine.budget import CostCap, CostCapBusy, CostCapReached, current_cap, spend
from contextlens.engine.retry import RetryPolicy, call_with_retry

UNIT = "cap-unit"  # one USD per prompt token


def cap_of(limit: float) -> CostCap:
    return CostCap(limit, prices=PriceTable({UNIT: (1_000_000, 0)}, defaults=False))


def tokens(n: int) -> Usage:
    return Usage(prompt_tokens=n)


async def call(cap: CostCap, worst: int, cost: int, said: list[str], name: str) -> None:
    """One call through the retry loop, as a judge makes it: ``worst`` reserved, ``cost``
    charged (0: released, as a refused call), its name said when it is sent."""

    async def attempt() -> None:
        with cap.spending(UNIT, tokens(worst)) as reservation:
            said.append(name)
            await asyncio.sleep(0.01)
            if cost:
                reservation.charge(tokens(cost))
            else:
                reservation.release()

    await call_with_retry(attempt, RetryPolicy(timeout=None))


def test_a_call_that_does_not_fit_waits_for_the_calls_in_flight_then_is_sent():
    async def main() -> None:
        cap = cap_of(3.0)
        first = cap.spending(UNIT, tokens(2))
        reservation = first.__enter__()
        with pytest.raises(CostCapBusy) as caught, cap.spending(UNIT, tokens(2)):
            pass  # 2 reserved + 2 > 3, but 0 spent + 2 fits: it waits
        assert not cap.reached
        busy = caught.value
        waiting = asyncio.create_task(busy.wait())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # nothing settled yet
        reservation.charge(tokens(1))
        first.__exit__(None, None, None)  # 1 spent: the second call fits now
        await waiting
        assert (cap.spent, cap.reserved) == (1.0, 2.0)  # reserved for it while it comes back
        with busy.resumed(), cap.spending(UNIT, tokens(2)) as second:
            second.charge(tokens(2))
        assert (cap.spent, cap.reserved, cap.reached) == (3.0, 0.0, False)

    asyncio.run(main())


def test_a_call_is_refused_when_what_is_settled_leaves_too_little():
    async def main() -> None:
        cap, said = cap_of(3.0), []
        tasks = [asyncio.create_task(call(cap, 2, 2, said, f"c{i}")) for i in range(3)]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        refused = [r for r in results if isinstance(r, CostCapReached)]
        assert said == ["c0"] and len(refused) == 2  # 2 spent: 1 left, each needs 2
        assert cap.reached and cap.needed == 2.0 and (cap.spent, cap.left) == (2.0, 1.0)
        assert "$2.0000 spent, $1.0000 left" in str(refused[0])
        assert refused[0].reason == "the cost cap of $3 was reached"

    asyncio.run(main())


def test_waiting_calls_go_next_step_first_then_to_the_metric_with_fewest_items():
    async def main() -> None:
        cap, said = cap_of(4.0), []

        async def of(metric: str, case: str, name: str, worst: int = 2) -> None:
            with attribute(None, metric, case):
                await call(cap, worst, 1, said, name)

        tasks = [asyncio.create_task(of("x", "1", "x1", worst=4))]
        await asyncio.sleep(0)  # x1 in flight, all of the cap reserved for it
        for metric, case, name in (("x", "2", "x2"), ("y", "1", "y1"), ("x", "1", "x1 again")):
            tasks.append(asyncio.create_task(of(metric, case, name)))
            await asyncio.sleep(0)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        # each call costs 1: after x1, its item's next call; then y, which has no item yet,
        # before x's second item; then 1 is left, too little for a call that may cost 2
        assert said == ["x1", "x1 again", "y1"]
        assert [type(r).__name__ for r in results] == [
            "NoneType",
            "CostCapReached",
            "NoneType",
            "NoneType",
        ]
        assert cap.items == {"x": 1, "y": 1} and cap.reached and cap.spent == 3.0

    asyncio.run(main())


def test_metrics_take_turns_while_room_frees_one_call_at_a_time():
    async def main() -> None:
        cap, said = cap_of(10.0), []

        async def of(metric: str, case: str) -> None:
            with attribute(None, metric, case):
                await call(cap, 2, 0, said, metric)  # each holds 2 of 2 while in flight

        cap.limit = 2.0  # one call in flight at a time; settled calls cost nothing
        tasks = [asyncio.create_task(of("big", "0"))]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(of("small", str(i))) for i in range(4)]
        tasks += [asyncio.create_task(of("big", str(i))) for i in range(1, 4)]
        await asyncio.gather(*tasks)
        # by turns, the metric with fewer items first (the older call when they are even):
        # the small metric's earlier calls do not pass all of the big metric's later ones
        assert said == ["big", "small", "small", "big", "small", "big", "small", "big"]
        assert cap.items == {"big": 4, "small": 4}

    asyncio.run(main())


def test_a_cancelled_waiting_call_gives_its_turn_away():
    async def main() -> None:
        cap, said = cap_of(2.0), []
        holder = asyncio.create_task(call(cap, 2, 0, said, "holder"))
        await asyncio.sleep(0)
        cancelled = asyncio.create_task(call(cap, 2, 0, said, "cancelled"))
        later = asyncio.create_task(call(cap, 2, 0, said, "later"))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(holder, later)
        assert said == ["holder", "later"] and (cap.spent, cap.reserved) == (0.0, 0.0)

    asyncio.run(main())


def test_what_the_cap_charges_unknowingly_is_in_the_ledger_too():
    """A call that may have been billed without saying what it used (a timeout, a reply
    without usage) is charged its whole reservation, and the ledger counts it as well."""

    async def main() -> tuple[CostCap, Ledger]:
        cap = cap_of(10.0)
        ledger = Ledger(prices=cap.prices)
        token = current_cap.set(cap)
        try:
            with attribute(ledger, "m", "c1", judge="j"):
                with pytest.raises(TimeoutError), spend(UNIT, lambda: tokens(3)):
                    raise TimeoutError  # sent, no reply: may have been billed
                with spend(UNIT, lambda: tokens(3)) as answered:
                    answered.charge(Usage())  # answered, no usage said
                with spend(UNIT, lambda: tokens(3)) as refused:
                    refused.release()
                with spend(UNIT, lambda: tokens(3)) as priced:
                    priced.charge(tokens(2))
                ledger.record(metric="m", judge="j", model=UNIT, usage=tokens(2), calls=1)
        finally:
            current_cap.reset(token)
        return cap, ledger

    cap, ledger = asyncio.run(main())
    assert cap.spent == 8.0 and ledger.total().cost == 8.0
    assert ledger.entries()[("m", "j")].cost == 8.0


def test_a_reported_usage_past_the_reservation_is_charged_whole():
    """The cap charges what the ledger counts, even past what was reserved; then it sends
    nothing more."""
    cap = cap_of(5.0)
    with cap.spending(UNIT, tokens(1)) as call:
        call.charge(tokens(100))  # the backend said it used more than the call could
    assert cap.spent == 100.0 and cap.left == 0.0
    with pytest.raises(CostCapReached), cap.spending(UNIT, tokens(1)):
        pass


def test_a_call_that_would_wait_outside_an_event_loop_is_told_so_and_holds_nothing():
    cap = cap_of(3.0)
    with (
        cap.spending(UNIT, tokens(2)),
        pytest.raises(RuntimeError, match="event loop"),
        cap.spending(UNIT, tokens(2)),
    ):
        pass
    assert (cap.spent, cap.reserved) == (2.0, 0.0)
    with cap.spending(UNIT, tokens(1)) as call:  # nothing was left waiting in line
        call.release()
