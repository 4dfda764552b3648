"""Objects of the user's called from threads: a call that never returns is abandoned after the
judge's timeout, said once by the object's name, and never keeps the process alive; an object
that does not say it is thread-safe is never entered by two threads at once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

from contextlens import ModelTestCase, evaluate
from contextlens.engine.retry import RetryPolicy
from contextlens.judges.foreign import DeepEvalModelBackend, OpikModelBackend

VERDICT = json.dumps({"reason": "Matches.", "score": 0.9})


def cases(n: int) -> list[ModelTestCase]:
    return [
        ModelTestCase(
            input=f"When do you open on day {i}?",
            actual_output="At 9 am.",
            expected_output="9 am.",
            retrieval_context=["We open at 9 am."],
        )
        for i in range(n)
    ]


class Gauge:
    """How many calls are inside an object at once, at most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = self.most = self.calls = 0

    def enter(self) -> None:
        with self.lock:
            self.inside += 1
            self.calls += 1
            self.most = max(self.most, self.inside)

    def leave(self) -> None:
        with self.lock:
            self.inside -= 1


class SyncOnly:
    """A DeepEval-shaped model with a blocking ``generate`` alone."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.gauge, self.seconds = Gauge(), seconds

    def get_model_name(self) -> str:
        return "sync-only"

    def generate(self, prompt: str, schema=None) -> str:
        self.gauge.enter()
        try:
            time.sleep(self.seconds)
            return VERDICT
        finally:
            self.gauge.leave()


class ThreadSafe(SyncOnly):
    thread_safe = True


class AsyncToo(SyncOnly):
    """``generate`` and an async ``a_generate`` (which is the one called)."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: set[int] = set()

    def generate(self, prompt: str, schema=None) -> str:
        raise AssertionError("a_generate is there: it is the one called")

    async def a_generate(self, prompt: str, schema=None) -> str:
        self.loops.add(id(asyncio.get_running_loop()))
        self.gauge.enter()
        try:
            await asyncio.sleep(0.05)
            return VERDICT
        finally:
            self.gauge.leave()


def scored(model: object, n: int = 12, **options: object) -> list[float | None]:
    run = evaluate(cases(n), ["context-precision"], judge=model, cache=False, progress=False,
                   **options)  # fmt: skip
    return [item.score for item in run.results]


def test_a_sync_only_model_is_called_one_call_at_a_time() -> None:
    model = SyncOnly()
    assert DeepEvalModelBackend(model).concurrency == 1  # the judge asks one call at a time
    assert scored(model) == [0.9] * 12
    assert model.gauge.calls == 12 and model.gauge.most == 1


def test_a_sync_only_model_is_entered_by_one_thread_whatever_the_caller_asks() -> None:
    model = SyncOnly()
    assert scored(model, max_concurrency=8) == [0.9] * 12  # eight calls in flight at once
    assert model.gauge.most == 1


def test_a_model_that_says_it_is_thread_safe_is_called_from_several_threads() -> None:
    model = ThreadSafe()
    assert DeepEvalModelBackend(model).concurrency is None  # the engine's default
    assert scored(model) == [0.9] * 12
    assert model.gauge.most > 1


def test_a_model_with_an_async_method_is_awaited_many_at_once_on_one_loop() -> None:
    model = AsyncToo()
    assert DeepEvalModelBackend(model).concurrency is None
    assert scored(model) == [0.9] * 12
    assert scored(model, n=4) == [0.9] * 4  # a second evaluate: a loop of its own, same home
    assert model.gauge.most > 1 and len(model.loops) == 1


def test_an_opik_model_that_implements_only_the_blocking_methods_is_called_one_at_a_time() -> None:
    async def not_implemented(self, *args, **kwargs):
        raise NotImplementedError("Async generation not implemented for this provider")

    base = type(  # Opik's base class: its async methods raise NotImplementedError
        "OpikBaseModel",
        (),
        {
            "__module__": "opik.evaluation.models.base_model",
            "__qualname__": "OpikBaseModel",
            "agenerate_string": not_implemented,
            "agenerate_provider_response": not_implemented,
        },
    )

    class Mine(base):  # type: ignore[misc, valid-type]
        model_name = "mine"

        def __init__(self) -> None:
            self.gauge = Gauge()

        def generate_string(self, input: str, **kwargs: object) -> str:
            self.gauge.enter()
            try:
                time.sleep(0.05)
                return VERDICT
            finally:
                self.gauge.leave()

        def generate_provider_response(self, messages: object, **kwargs: object) -> object:
            raise NotImplementedError

    model = Mine()
    assert OpikModelBackend(model).concurrency == 1
    assert scored(model, n=8, max_concurrency=8) == [0.9] * 8
    assert model.gauge.calls == 8 and model.gauge.most == 1


def test_an_abandoned_call_is_said_once_and_the_object_is_not_entered_again_meanwhile() -> None:
    release = threading.Event()

    class Stuck(SyncOnly):
        """Answers its first call, then hangs (a socket gone dead) until released."""

        def generate(self, prompt: str, schema=None) -> str:
            self.gauge.enter()
            try:
                if self.gauge.calls > 1:
                    release.wait(30)
                return VERDICT
            finally:
                self.gauge.leave()

    model = Stuck()
    retry = RetryPolicy(timeout=0.5, max_attempts=1, budget=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.monotonic()
        run = evaluate(cases(3), ["context-precision"], judge=model, cache=False,
                       progress=False, retry=retry, max_concurrency=3)  # fmt: skip
        took = time.monotonic() - started
    assert took < 10
    assert sorted(str(item.score) for item in run.results) == ["0.9", "None", "None"]
    failed = [item for item in run.results if item.failed]
    assert all("no reply within 0.5s" in (item.error or "") for item in failed)
    said = [str(w.message) for w in caught if "Stuck.generate" in str(w.message)]
    assert len(said) == 1, said  # once, by the object's name
    assert "abandoned" in said[0] and "thread_safe = True" in said[0]
    assert model.gauge.calls == 2 and model.gauge.most == 1  # the third waited, never made
    release.set()
    deadline = time.monotonic() + 10
    while model.gauge.inside and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert model.gauge.calls == 2  # nor made once the object was free: its caller gave up


HUNG = textwrap.dedent(
    """
    import threading, time, warnings
    from contextlens import ModelTestCase, evaluate
    from contextlens.engine.retry import RetryPolicy

    class Hung:
        thread_safe = {thread_safe}

        def get_model_name(self):
            return "hung"

        def generate(self, prompt, schema=None):
            threading.Event().wait()  # a dead socket: it never returns

    warnings.simplefilter("always")
    case = ModelTestCase(input="q?", actual_output="a", expected_output="a",
                         retrieval_context=["c"])
    started = time.monotonic()
    try:
        run = evaluate([case, case], ["context-precision"], judge=Hung(), cache=False,
                       progress=False, retry=RetryPolicy(timeout=1, max_attempts=1, budget=2))
        print("ERRORS", [item.error for item in run.results])
    except Exception as exc:  # the judge never answered: the run stops
        print("STOPPED", type(exc).__name__, exc)
    print("RETURNED", round(time.monotonic() - started, 1), flush=True)
    """
)


@pytest.mark.parametrize("thread_safe", [False, True])
def test_a_user_model_that_never_returns_does_not_keep_the_process_alive(
    tmp_path, thread_safe: bool
) -> None:
    script = tmp_path / "hung.py"
    script.write_text(HUNG.format(thread_safe=thread_safe), encoding="utf-8")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process did not end: {exc.stdout!r}")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "RETURNED" in done.stdout and (
        "no reply within 1s" in done.stdout or "STOPPED" in done.stdout
    )
    returned = float(done.stdout.split("RETURNED ")[1].split()[0])
    assert returned < 10  # evaluate gave up after its timeout
    assert took < returned + 20  # and the process ended then, the hung threads left behind
    assert done.stderr.count("Hung.generate had not returned") == 1  # said once, by name
