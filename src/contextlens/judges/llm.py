""":class:`LLMJudge`: a chat backend made into a :class:`Judge`, on the engine.

The one place where a judge call happens: cache, then limiter and retry around the
backend, then parsing with the single re-ask carrying the validation error. Every call is
recorded in the active :class:`~contextlens.engine.accounting.Ledger`.
"""

from __future__ import annotations

import copy
import json
import math
import time
import warnings
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel

from contextlens.backend import (
    BackendConnectionError,
    BackendError,
    BackendTimeout,
    ChatBackend,
    Completion,
    InvalidReply,
    Message,
    RateLimited,
    Usage,
)
from contextlens.engine import accounting, budget
from contextlens.engine.cache import Cache, NullCache, current_repeat
from contextlens.engine.limiter import (
    DEFAULT_LIMIT,
    FOUND_BY_RAMP,
    REPORTED,
    Limiter,
    Ramp,
    limiter_for,
)
from contextlens.engine.reach import JudgeUnreachable, reach_for
from contextlens.engine.retry import RetryPolicy, call_with_retry, within
from contextlens.engine.tokens import BYTES, CHARS, counter_for
from contextlens.errors import JudgeError, described
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judgement
from contextlens.judges.errors import note_failure
from contextlens.judges.foreign import as_chat_backend
from contextlens.judges.parsing import (
    ReplyError,
    compact_schema_json,
    parse_reply,
    reask_messages,
)
from contextlens.judges.sizing import call_size
from contextlens.redact import logger

T = TypeVar("T", bound=BaseModel)

_said: set[str] = set()


def _say_once(key: str, text: str) -> None:
    """Warn ``text`` once per backend and process (the command shows it as a note)."""
    if key not in _said:
        _said.add(key)
        log.info("%s", text)
        warnings.warn(text, UserWarning, stacklevel=4)


log = logger("contextlens.judge")

#: Seconds a batched call may take, retries included: a provider's 24-hour window, twice.
BATCH_BUDGET = 2 * 24 * 3600.0


class LLMJudge:
    """Judge through a chat backend.

    A reply that does not parse or validate is re-asked once with the error; a second
    bad reply raises :class:`JudgeError` with the reason, as does a transport failure that
    outlasts the retry policy. Calls in flight on the backend are bounded by the limiter
    its ``key`` shares with every other judge on it (``max_concurrency`` sets that bound;
    None takes the backend's ``concurrency``, or leaves it as it is); the bound adapts down on
    rate limits. Replies are cached (``cache=``) by backend, model, parameters, messages,
    schema and repeat index, so an identical call is never paid for twice.

    ``backend`` is a :class:`ChatBackend`, or an object of its shape, adapted once
    (:func:`~contextlens.judges.foreign.as_chat_backend`); the judge reads only what a
    :class:`ChatBackend` declares.
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        max_concurrency: int | None = None,
        limiter: Limiter | None = None,
        cache: Cache | NullCache | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.backend = as_chat_backend(backend)
        if max_concurrency is None:
            max_concurrency = self.backend.concurrency
        self.limiter = limiter or limiter_for(self.backend.key, max_concurrency)
        self.reach = reach_for(self.backend.key)
        self.cache = cache if cache is not None else NullCache()
        if retry is None and self.backend.batched:  # a batch answers within its window
            retry = RetryPolicy(timeout=None, budget=BATCH_BUDGET)
        elif retry is None:  # the backend's own timeout, when it has one (a local server's is long)
            retry = RetryPolicy()
            timeout = self.backend.timeout
            if timeout is not None and timeout > 0:
                retry = replace(retry, timeout=timeout, budget=max(retry.budget, 3 * timeout))
        self.retry = retry
        # The policy without its timeout: attempt() applies it per call, once a slot is held.
        self._untimed = replace(self.retry, timeout=None)
        self._last_params: tuple[Mapping[str, Any], Any] | None = None

    @property
    def name(self) -> str:
        return f"{self.backend.name}:{self.backend.model}"

    def __repr__(self) -> str:
        return f"LLMJudge({self.backend!r})"

    def connection_key(self) -> str:
        """The backend's key: every judge on it shares one concurrency bound."""
        return self.backend.key

    def max_connections(self) -> int:
        """Calls in flight at most (the limiter's bound)."""
        return self.limiter.max_limit

    def preflight(self) -> None:
        """Raise :class:`~contextlens.backend.JudgeNotReady` when no call could succeed (the
        backend's own check)."""
        self.backend.preflight()

    def with_limiter(self, limiter: Limiter) -> LLMJudge:
        """This judge with its calls bounded by ``limiter`` instead (a copy: the judge a
        user made is never changed by a run)."""
        bound = copy.copy(self)
        bound.limiter = limiter
        return bound

    def _key_params(self) -> Any:
        """The backend's parameters as JSON values (made again only when they change)."""
        params = self.backend.params
        last = self._last_params
        if last is None or last[0] != params:
            value = json.loads(json.dumps(params, default=str)) if params else {}
            self._last_params = last = (params, value)
        return last[1]

    def _cache_key(self, messages: list[Message], schema: type[BaseModel]) -> str:
        formats = self.backend.formats
        return Cache.key(
            backend=self.backend.name,
            model=self.backend.model,
            params=self._key_params(),
            structured=bool(self.backend.use_structured_output),
            mode=formats.mode if formats is not None else None,  # the prompt and reply follow it
            messages=list(messages),
            schema=compact_schema_json(schema),
            repeat=current_repeat.get(),
        )

    def cached(self, messages: Sequence[Message], schema: type[BaseModel]) -> Completion | None:
        """The cached reply to this call, if the cache has it (the cache is only read)."""
        if isinstance(self.cache, NullCache):
            return None
        return self.cache.get_completion(self._cache_key(list(messages), schema))

    async def _find_limit(self) -> tuple[int, str] | Ramp | None:
        """The limit a server reports (llama.cpp's slots, TGI's concurrent requests), else a
        :class:`~contextlens.engine.limiter.Ramp` for a local server that does not say (up to
        the engine's default); None for a remote API (the engine's default). A probe that
        fails is a server that did not say."""
        try:
            slots = await self.backend.server_slots()
        except Exception as exc:  # a user's backend's probe: it never fails the run
            log.info("%s: asking its slots failed: %s: %s", self.name, type(exc).__name__, exc)
            slots = None
        if slots:
            return slots, REPORTED
        if self.backend.local:
            return Ramp(DEFAULT_LIMIT)
        return None

    def _say_limit(self) -> None:
        """Say once what the limit of a local server is and how it was found, when the server
        reported it or a ramp has found it."""
        limiter = self.limiter
        if limiter.origin == REPORTED:
            how = REPORTED
        elif limiter.origin == FOUND_BY_RAMP and limiter.ramp is not None:
            how = (
                f"{FOUND_BY_RAMP} ({limiter.ramp.reason}); if it serves more, say so with "
                "--concurrency N (or ?concurrency=N on the judge spec, max_concurrency= in "
                "Python)"
            )
        else:
            return
        n = limiter.max_limit
        calls = "one call" if n == 1 else f"{n} calls"
        _say_once(
            self.backend.key, f"the judge {self.backend.key} is asked {calls} at a time: {how}"
        )

    def _worst(self, messages: Sequence[Message], schema: type[BaseModel]) -> Usage:
        """The most a call could use: its prompt (the model's tokenizer with a margin where
        it is known, else UTF-8 bytes) and every completion token it may take."""
        size = call_size(self.backend, messages, schema)
        counter = counter_for(self.backend.model)
        if counter is CHARS:
            prompt = BYTES.prompt(size.messages, size.schema_text)
        else:
            prompt = math.ceil(counter.prompt(size.messages, size.schema_text) * 1.05) + 16
        return Usage(prompt_tokens=prompt, completion_tokens=size.max_tokens)

    def _constrained(self, reply: Completion) -> bool:
        """Whether ``reply`` was decoded under its schema: parsed by the backend, else as the
        reply says, else as the backend declares (a cached reply has only the backend's word;
        one that stepped down to the prompt alone is not constrained)."""
        if reply.parsed is not None:
            return True
        if reply.constrained is not None:
            return reply.constrained
        return self.backend.constrained

    def read(self, reply: Completion, schema: type[T], *, fence: Fence = DEFAULT_FENCE) -> T:
        """``reply`` validated as this judge reads its replies: strictly when it was decoded
        under the schema, leniently where the schema allows it otherwise (see
        :func:`~contextlens.judges.parsing.parse_reply`)."""
        return parse_reply(
            reply.text,
            schema,
            parsed=reply.parsed,
            bos=fence.bos,
            eos=fence.eos,
            constrained=self._constrained(reply),
        )

    def _record(self, **counts: Any) -> None:
        accounting.record(judge=self.name, model=self.backend.price_key, **counts)

    async def _call(
        self, messages: list[Message], key: str | None, schema: type[BaseModel]
    ) -> tuple[Completion, bool]:
        """The reply to ``messages``, and whether it was asked for now (False: it was cached)."""
        if key is not None:
            cached = self.cache.get_completion(key)
            if cached is not None:
                self._record(cache_hits=1)
                return cached, False

        if self.limiter.origin is None:
            await self.limiter.settle(self._find_limit)
            self._say_limit()

        def send() -> Awaitable[Completion]:
            return self.backend.complete(messages, schema=schema)

        async def attempt() -> Completion:
            # The timeout runs from the moment the call is sent, not while it waits for a
            # slot. A call is counted when the server answered it, with any status, or when
            # it timed out waiting; one whose connection dropped is counted as dropped (it may
            # or may not have reached the server); a refused one is not counted. Under a
            # cost cap, the call's most is reserved before it is sent (CostCapReached when it
            # could pass the cap), and a call that cannot have been billed is charged nothing.
            # While a ramp finds the limit, the calls it times are timed here, from the send
            # to the reply, per completion token where the server counts them.
            async with self.limiter.slot():
                with budget.spend(
                    self.backend.price_key, lambda: self._worst(messages, schema)
                ) as cost:
                    level = self.limiter.sent()
                    sent_at = time.perf_counter()
                    try:
                        reply = await (within(send, timeout) if timeout else send())
                    except RateLimited:
                        self.reach.on_answer()
                        self.limiter.on_rate_limited()
                        self._say_limit()
                        self._record(calls=1)
                        cost.release()
                        raise
                    except BackendConnectionError as exc:  # no reply came: a retry, not a call
                        self._record(dropped=int(exc.connected))
                        if not exc.connected:  # refused: stop soon if it never answered
                            cost.release()
                            self.reach.on_refused(exc.message, self.backend.key)
                        raise
                    except BackendTimeout as exc:  # the server is slower than its load: ease off
                        self.limiter.on_timeout()
                        self._say_limit()
                        self._record(calls=1)
                        self.reach.on_timeout(
                            str(exc), self.backend.key
                        )  # stop if it never answered
                        raise
                    except BackendError as exc:  # an error reply: the server is there
                        if exc.status is not None:
                            self.reach.on_answer()
                            cost.release()
                        self._record(calls=1)
                        raise
                    except BaseException:  # a cancellation, or a backend's own exception
                        self._record(calls=1)
                        raise
                    took = time.perf_counter() - sent_at
                    cost.charge(reply.usage, reply.cost)
                self.reach.on_answer()
                self._record(calls=1, usage=reply.usage, seconds=reply.latency, cost=reply.cost)
            self.limiter.on_success()
            if level is not None:  # per completion token where counted: a long reply is no slowdown
                tokens = reply.usage.completion_tokens
                self.limiter.answered(level, took / tokens if tokens > 0 else took)
                self._say_limit()
            return reply

        def on_retry(exc: BaseException, wait: float) -> None:
            self._record(retries=1)
            log.debug(
                "%s: retrying %s in %.2fs after %s",
                accounting.current_case.get(),
                self.name,
                wait,
                exc,
            )

        timeout = self.retry.timeout
        reply = await call_with_retry(attempt, self._untimed, on_retry=on_retry)
        if isinstance(reply.parsed, BaseModel):  # structured output: keep it cacheable
            reply = replace(reply, parsed=reply.parsed.model_dump(mode="json"))
        return reply, True

    async def judge(
        self, messages: Sequence[Message], schema: type[T], *, fence: Fence = DEFAULT_FENCE
    ) -> Judgement[T]:
        """Ask, validate, re-ask once on an invalid reply.

        Replies enter the cache only once the item is settled with a valid reply (the first,
        invalid one too when the re-ask succeeded, so a re-run replays the same exchange); an
        item that fails is asked afresh on the next run. A reply that came from the cache is
        not written again.
        """
        caching = not isinstance(self.cache, NullCache)
        convo = list(messages)
        usage, latency = Usage(), 0.0
        settled: list[tuple[str, Completion]] = []
        for attempt in (1, 2):
            key = self._cache_key(convo, schema) if caching else None
            try:
                reply, fresh = await self._call(convo, key, schema)
                if key is not None and fresh:
                    settled.append((key, reply))
                usage, latency = usage + reply.usage, latency + reply.latency
                output = self.read(reply, schema, fence=fence)
            except (ReplyError, InvalidReply) as exc:
                # InvalidReply: a backend that enforces the schema itself said no.
                raw = exc.raw if isinstance(exc, InvalidReply) else reply.text
                problem = exc.message if isinstance(exc, InvalidReply) else str(exc)
                if attempt == 2:
                    self._record(failures=1)
                    raise JudgeError(
                        f"invalid reply after one re-ask: {problem}", raw=raw
                    ) from None
                log.debug(
                    "%s: re-asking %s after an invalid reply: %s",
                    accounting.current_case.get(),
                    self.name,
                    problem,
                )
                convo = reask_messages(list(messages), raw or "", problem, fence.bos, fence.eos)
                continue
            except (JudgeUnreachable, budget.CostCapReached):  # the run stops, no item fails
                raise
            except Exception as exc:
                self._record(failures=1)
                note_failure(exc, users=self.backend.user_object)
                raise JudgeError(f"{self.name}: {described(exc)}") from exc
            for cache_key, completion in settled:
                self.cache.put_completion(cache_key, completion)
            return Judgement(
                output=output, raw=reply.text, usage=usage, latency=latency, attempts=attempt
            )
        raise AssertionError("unreachable")
