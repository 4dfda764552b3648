"""Counts, prices, the ledger and attribution through context variables."""

from __future__ import annotations

import asyncio
import threading

import pytest

from contextlens.backend import Usage
from contextlens.engine.accounting import (
    PRICES,
    Counts,
    Ledger,
    PriceTable,
    attribute,
    current_ledger,
    current_metric,
    record,
)


def test_counts_add_and_dump() -> None:
    a = Counts(calls=1, dropped=8, cache_hits=2, retries=3, failures=4, prompt_tokens=5,
               completion_tokens=6, cost=0.5, unpriced_calls=7, seconds=1.5)  # fmt: skip
    b = Counts(calls=10, dropped=80, cache_hits=20, retries=30, failures=40, prompt_tokens=50,
               completion_tokens=60, cost=0.25, unpriced_calls=70, seconds=3.0)  # fmt: skip
    total = a + b
    assert total.model_dump() == {
        "calls": 11,
        "dropped": 88,
        "cache_hits": 22,
        "retries": 33,
        "failures": 44,
        "prompt_tokens": 55,
        "completion_tokens": 66,
        "cost": 0.75,
        "unpriced_calls": 77,
        "seconds": 4.5,
    }
    assert total.total_tokens == 121
    assert a.calls == 1  # operands untouched
    assert sum([a, b], Counts()) == total


def test_cost_of_known_models_by_hand() -> None:
    table = PriceTable()
    # gpt-4o-mini: $0.15 / $0.60 per 1M -> 1000 * 0.15e-6 + 500 * 0.60e-6
    assert table.cost("gpt-4o-mini", Usage(1000, 500)) == pytest.approx(0.00045)
    # gpt-4o: $2.50 / $10 per 1M
    assert table.cost("gpt-4o", Usage(2_000_000, 100_000)) == pytest.approx(6.0)
    assert table.cost("gpt-4.1-nano", Usage(0, 0)) == 0.0


def test_unknown_model_is_unpriced_not_free() -> None:
    table = PriceTable()
    assert table.price("llama3:8b") is None
    assert table.cost("llama3:8b", Usage(100, 100)) is None
    assert table.price(None) is None
    ledger = Ledger(prices=table)
    ledger.record(metric="m", judge="j", model="llama3:8b", usage=Usage(100, 50), calls=2)
    ledger.record(metric="m", judge="j", model="gpt-4o-mini", usage=Usage(1000, 500), calls=1)
    ledger.record(metric="m", judge="j", model=None, usage=Usage(1, 1), calls=1)
    total = ledger.total()
    assert total.unpriced_calls == 3
    assert total.calls == 4
    assert total.prompt_tokens == 1101
    assert total.cost == pytest.approx(0.00045)  # the sum of the priced call only


def test_a_registration_changes_the_price_of_names_already_looked_up() -> None:
    table = PriceTable()
    assert table.price("llama3:8b") is None
    assert table.price("openai/gpt-4o-mini@batch") == (0.075, 0.30)
    table.register("llama3:8b", 1.0, 2.0)
    table.register("gpt-4o-mini", 1.0, 3.0)
    assert table.price("llama3:8b") == (1.0, 2.0)
    assert table.price("openai/gpt-4o-mini@batch") == (0.5, 1.5)


def test_prefix_and_date_suffix_lookup() -> None:
    table = PriceTable()
    mini = table.price("gpt-4o-mini")
    assert mini == (0.15, 0.60)
    assert table.price("openai/gpt-4o-mini") == mini
    assert table.price("openrouter/openai/gpt-4o-mini") == mini
    assert table.price("gpt-4o-mini-2024-07-18") == mini
    assert table.price("openai/gpt-4o-mini-2024-07-18") == mini
    assert table.price("GPT-4o-Mini") == mini
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o") == (2.5, 10.0)
    assert table.price("gpt-4.1-mini-2025-04-14") == (0.40, 1.60)
    # no fuzzy prefix matching: a different model is not priced as its base
    assert table.price("gpt-4o-mini-audio") is None
    assert table.price("gpt-4o-unknown") is None


def test_register_and_exact_beats_suffix_stripping() -> None:
    table = PriceTable(defaults=False)
    assert table.price("gpt-4o") is None
    table.register("my-local", 1.0, 2.0)
    assert table.cost("my-local", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    table.register("gpt-4o", 2.5, 10.0)
    table.register("gpt-4o-2024-05-13", 5.0, 15.0)
    assert table.price("gpt-4o-2024-05-13") == (5.0, 15.0)
    assert table.price("gpt-4o-2024-08-06") == (2.5, 10.0)
    assert "my-local" in table and "other" not in table
    with pytest.raises(ValueError):
        table.register("bad", -1, 0)


def test_ledger_uses_module_prices_at_record_time() -> None:
    ledger = Ledger()
    name = "contextlens-test-model-xyz"
    ledger.record(metric="m", judge="j", model=name, usage=Usage(10, 10), calls=1)
    PRICES.register(name, 1.0, 1.0)
    try:
        ledger.record(metric="m", judge="j", model=name, usage=Usage(1_000_000, 0), calls=1)
    finally:
        PRICES._prices.pop(name)
    total = ledger.total()
    assert total.unpriced_calls == 1
    assert total.cost == pytest.approx(1.0)


def test_by_metric_total_and_report() -> None:
    ledger = Ledger()
    ledger.record(metric="a", judge="j1", model="gpt-4o-mini", usage=Usage(10, 5), calls=1)
    ledger.record(metric="a", judge="j2", cache_hits=1)
    ledger.record(metric="b", judge="j1", retries=2, failures=1, calls=3)
    by_metric = ledger.by_metric()
    assert set(by_metric) == {"a", "b"}
    assert by_metric["a"].calls == 1 and by_metric["a"].cache_hits == 1
    assert by_metric["b"].retries == 2 and by_metric["b"].failures == 1
    assert ledger.by_judge()["j1"].calls == 4
    assert ledger.total().calls == 4
    data = ledger.report()
    assert data.total == ledger.total()
    assert data.by_metric["b"].calls == 3
    assert len(data.entries) == 3
    assert {(e.metric, e.judge, e.calls) for e in data.entries} == {
        ("a", "j1", 1),
        ("a", "j2", 0),
        ("b", "j1", 3),
    }
    # another process's entries, merged, count once each
    other = Ledger()
    other.merge(data.entries)
    assert other.report() == data
    # returned counts are copies
    ledger.by_metric()["a"].calls = 99
    assert ledger.by_metric()["a"].calls == 1


def test_record_without_ledger_does_nothing() -> None:
    assert current_ledger.get() is None
    assert current_metric.get() == "unattributed"
    record(judge="j", calls=1)  # no error, nowhere to go


def test_attribute_follows_tasks_in_two_scopes() -> None:
    ledger = Ledger()

    async def judge_call(n: int) -> None:
        await asyncio.sleep(0.001 * (n % 3))
        record(judge="j", model="gpt-4o-mini", usage=Usage(100, 10), calls=1)

    async def metric_run(metric: str, n: int) -> None:
        with attribute(ledger, metric):
            await asyncio.gather(*(asyncio.create_task(judge_call(i)) for i in range(n)))

    async def main() -> None:
        await asyncio.gather(metric_run("faithfulness", 5), metric_run("relevance", 3))
        record(judge="j", calls=1)  # outside any scope: not recorded

    asyncio.run(main())
    by_metric = ledger.by_metric()
    assert by_metric["faithfulness"].calls == 5
    assert by_metric["relevance"].calls == 3
    assert by_metric["relevance"].prompt_tokens == 300
    assert "unattributed" not in by_metric
    assert current_ledger.get() is None


def test_attribute_nests_and_restores() -> None:
    outer, inner = Ledger(), Ledger()
    with attribute(outer, "a"):
        with attribute(inner, "b"):
            record(judge="j", calls=1)
        record(judge="j", calls=1, metric="explicit")
        record(judge="j", calls=1)
    assert inner.by_metric()["b"].calls == 1
    assert set(outer.by_metric()) == {"a", "explicit"}
    assert current_metric.get() == "unattributed"


def test_thread_safety() -> None:
    ledger = Ledger()
    threads_n, per_thread = 16, 500
    barrier = threading.Barrier(threads_n)

    def work(i: int) -> None:
        barrier.wait()
        for _ in range(per_thread):
            ledger.record(
                metric=f"m{i % 2}", judge="j", model="gpt-4o-mini", usage=Usage(3, 1), calls=1
            )

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = ledger.total()
    assert total.calls == threads_n * per_thread
    assert total.prompt_tokens == 3 * threads_n * per_thread
    assert ledger.by_metric()["m0"].calls == threads_n * per_thread // 2


def test_the_running_counts_are_the_counts():
    from dataclasses import fields

    from contextlens.engine.accounting import COUNTED, _Running

    assert tuple(f.name for f in fields(_Running)) == COUNTED
