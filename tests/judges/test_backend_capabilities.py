"""What a backend declares is what the engine does: its slots bound the calls in flight, its
timeout the retry policy, its price key the cost, its preflight the start of a run; an object
of a backend's shape is adapted once, with the defaults for what it does not declare."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import BaseModel

from contextlens import Batch, Context, Dataset, ModelTestCase, evaluate
from contextlens.backend import ChatBackend, Completion, JudgeNotReady, Message, Usage
from contextlens.embeddings.adapters import UserEmbedder, as_embedder
from contextlens.embeddings.base import identity_of
from contextlens.engine.accounting import PRICES, Ledger, attribute
from contextlens.judges import LLMJudge, resolve_judge
from contextlens.judges.foreign import UserBackend, as_chat_backend
from contextlens.judges.schema import Verdict as YesNo

MSGS: list[Message] = [{"role": "user", "content": "judge this"}]
REPLY = json.dumps({"reason": "ok", "score": 0.7})


class Scored(BaseModel):
    reason: str
    score: float


class Answering(ChatBackend):
    """A backend that answers every call with ``reply`` after ``delay`` seconds and counts the
    calls it has in flight."""

    name = "answering"

    def __init__(self, model: str = "m", *, reply: str = REPLY, delay: float = 0.0) -> None:
        self.model = model
        self.reply = reply
        self.delay = delay
        self.calls = self.in_flight = self.peak = 0

    @property
    def key(self) -> str:
        return f"answering:{id(self)}#{self.model}"

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return Completion(self.reply, Usage(1000, 100), 0.01)
        finally:
            self.in_flight -= 1


class FourSlots(Answering):
    concurrency = 4


class LocalReporting(Answering):
    local = True

    def __init__(self, slots: int | None) -> None:
        super().__init__(delay=0.05)
        self.slots = slots

    async def server_slots(self) -> int | None:
        return self.slots


def cases(n: int) -> list[ModelTestCase]:
    return [
        ModelTestCase(
            input=f"question {i}?",
            actual_output="an answer",
            expected_output="the answer",
            retrieval_context=["a chunk", "another chunk"],
        )
        for i in range(n)
    ]


# --- slots ----------------------------------------------------------------------------------


async def test_a_backend_declaring_four_slots_gets_four_calls_in_flight():
    backend = FourSlots(delay=0.02)
    judge = resolve_judge(backend)
    await asyncio.gather(*(judge.judge(MSGS, Scored) for _ in range(20)))
    assert (backend.calls, backend.peak, judge.max_connections()) == (20, 4, 4)
    unbounded = Answering(delay=0.02)  # the engine's default of 16
    judge = LLMJudge(unbounded)
    await asyncio.gather(*(judge.judge(MSGS, Scored) for _ in range(20)))
    assert unbounded.peak == 16


@pytest.mark.parametrize(("slots", "most", "origin"), [(3, 3, "reported"), (None, 16, "found")])
async def test_a_local_backend_takes_the_slots_it_reports_else_what_a_ramp_finds(
    slots, most, origin
):
    backend = LocalReporting(slots)  # it serves any number at once, at the same speed
    judge = LLMJudge(backend)
    await asyncio.gather(*(judge.judge(MSGS, Scored) for _ in range(80)))
    assert (backend.peak, judge.limiter.max_limit) == (most, most)
    assert judge.limiter.origin.startswith(origin)


# --- timeout --------------------------------------------------------------------------------


async def test_the_declared_timeout_bounds_each_call():
    class Slow(Answering):
        timeout = 0.2

        async def complete(self, messages, *, schema=None):
            if self.calls == 0:
                self.calls += 1
                await asyncio.sleep(30)  # never answers: the judge stops waiting
            return await super().complete(messages, schema=schema)

    judge = LLMJudge(Slow())
    started = time.monotonic()
    out = await judge.judge(MSGS, Scored)
    assert out.output.score == 0.7 and time.monotonic() - started < 5
    assert judge.retry.timeout == 0.2 and judge.limiter.timeouts == 1


# --- price key ------------------------------------------------------------------------------


async def test_calls_are_priced_by_the_price_key_not_the_model_name():
    class Deployment(Answering):
        name = "deployment"
        price_key = "gpt-4o-mini"

    ledger = Ledger()
    with attribute(ledger, "m"):
        await LLMJudge(Deployment("my-azure-deployment")).judge(MSGS, Scored)
        await LLMJudge(Answering("my-azure-deployment")).judge(MSGS, Scored)
    prompt, completion = PRICES.price("gpt-4o-mini")
    priced = ledger.by_judge()["deployment:my-azure-deployment"]
    assert priced.cost == pytest.approx((1000 * prompt + 100 * completion) / 1e6)
    assert priced.unpriced_calls == 0
    unpriced = ledger.by_judge()["answering:my-azure-deployment"]
    assert (unpriced.cost, unpriced.unpriced_calls) == (0.0, 1)


def test_a_backend_without_a_price_key_is_refused_under_a_cost_cap_by_name():
    class Unpriced(Answering):
        price_key = None

    backend = Unpriced("gpt-4o-mini")  # a priced name, but the backend says not to price it
    with pytest.raises(ValueError, match=r"answering:gpt-4o-mini.*price_key") as info:
        evaluate(cases(2), ["context-precision"], judge=backend, max_cost=1.0, cache=False,
                 progress=False)  # fmt: skip
    assert "--max-cost" in str(info.value) and backend.calls == 0
    priced = Answering("gpt-4o-mini")
    run = evaluate(cases(2), ["context-precision"], judge=priced, max_cost=1.0, cache=False,
                   progress=False)  # fmt: skip
    assert priced.calls > 0 and run.accounting.total.cost > 0


def test_a_model_without_a_price_is_refused_naming_its_price_key():
    with pytest.raises(ValueError, match=r"no price for 'house-model'"):
        evaluate(cases(1), ["context-precision"], judge=Answering("house-model"), max_cost=1.0,
                 cache=False, progress=False)  # fmt: skip


# --- preflight and constrained output --------------------------------------------------------


def test_a_declared_preflight_stops_the_run_before_any_call():
    class NoKey(Answering):
        def preflight(self) -> None:
            raise JudgeNotReady("set HOUSE_KEY")

    backend = NoKey()
    with pytest.raises(JudgeNotReady, match="HOUSE_KEY"):
        evaluate(cases(2), ["context-precision"], judge=backend, cache=False, progress=False)
    assert backend.calls == 0


class Statement(BaseModel):
    statement: str
    verdict: YesNo


async def test_a_backend_that_constrains_its_replies_is_read_strictly():
    said = json.dumps({"statement": "s", "verdict": "Yes."})

    class Grammar(Answering):
        constrained = True

    loose = await LLMJudge(Answering(reply=said)).judge(MSGS, Statement)
    assert loose.output.verdict == "yes" and loose.attempts == 1
    strict = Grammar(reply=said)
    with pytest.raises(Exception, match="verdict"):
        await LLMJudge(strict).judge(MSGS, Statement)
    assert strict.calls == 2  # asked, then re-asked once with the error


# --- objects of a backend's shape -------------------------------------------------------------


class Shaped:
    """A backend of the user's that does not subclass ChatBackend."""

    name = "shaped"
    model = "gpt-4o-mini"
    use_structured_output = False

    def __init__(self, **declared: object) -> None:
        self.params = {"t": 0}
        self.calls = 0
        self.__dict__.update(declared)

    @property
    def key(self) -> str:
        return f"shaped:{id(self)}"

    async def complete(self, messages, *, schema=None):
        self.calls += 1
        return Completion(REPLY, Usage(10, 5), 0.01)


async def test_an_object_of_a_backends_shape_is_adapted_once_with_the_defaults():
    obj = Shaped()
    judge = resolve_judge(obj)
    backend = judge.backend
    assert isinstance(backend, UserBackend) and backend.obj is obj
    assert (backend.concurrency, backend.timeout, backend.local, backend.max_tokens) == (
        None,
        None,
        False,
        None,
    )
    assert backend.price_key == "gpt-4o-mini" and backend.formats is None
    assert backend.constrained is False and backend.user_object is False
    assert backend.key == obj.key and backend.params == {"t": 0}
    assert as_chat_backend(backend) is backend  # not adapted twice
    assert LLMJudge(backend).backend is backend
    assert judge.name == "shaped:gpt-4o-mini" and judge.max_connections() == 16
    backend.preflight()  # it declares none: nothing to check
    assert await backend.server_slots() is None
    out = await judge.judge(MSGS, Scored)
    assert out.output.score == 0.7 and obj.calls == 1


async def test_what_a_shaped_object_declares_is_read_when_it_is_adapted():
    obj = Shaped(concurrency=3, timeout=12, local=True, price_key=None, constrained=True)
    judge = LLMJudge(obj)
    obj.concurrency = 9  # read once, when adapted
    assert (judge.backend.concurrency, judge.limiter.max_limit, judge.retry.timeout) == (3, 3, 12)
    assert judge.backend.local is True and judge.backend.constrained is True
    assert judge.backend.price_key is None
    odd = LLMJudge(Shaped(concurrency=0, timeout=-1, max_tokens="400")).backend
    assert (odd.concurrency, odd.timeout, odd.max_tokens) == (None, None, None)


def test_an_object_without_a_backends_shape_is_refused_naming_what_it_lacks():
    class Half:
        name, model = "half", "m"

        async def complete(self, messages, *, schema=None): ...

    with pytest.raises(TypeError, match="key, params, use_structured_output"):
        LLMJudge(Half())


# --- embedders --------------------------------------------------------------------------------


class PlainEmbedder:
    """An embedder of the user's with a name and ``embed`` only."""

    name = "plain"

    def __init__(self) -> None:
        self.identity = {"kind": "plain", "dim": 4}
        self.active = self.peak = 0

    async def embed(self, texts):
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        rows = np.ones((len(texts), 4), np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_an_embedder_that_declares_nothing_is_adapted_as_not_batching():
    plain = PlainEmbedder()
    adapted = as_embedder(plain)
    assert isinstance(adapted, UserEmbedder) and adapted.batches_concurrent_calls is False
    assert identity_of(adapted) == identity_of(plain)  # its vectors are cached as before
    assert as_embedder(adapted) is adapted
    sessions = [
        Dataset(
            session_id=f"s{i}",
            assistant_id="bot",
            context=f"Context number {i}: the shop opens at {i % 12 + 1} am.",
            conversation=[Batch(qa_id="q", query=f"question {i}", assistant=f"answer {i}")],
        )
        for i in range(200)
    ]
    evaluate(sessions, [Context()], embedder=plain, cache=False, progress=False)
    assert plain.peak == 32  # twice the default judge bound, not the batching embedder's 512
