"""Batch judging: judge calls gathered into a provider's batch at its batch price.

:class:`BatchBackend` is a :class:`~contextlens.backend.ChatBackend` whose :meth:`complete`
does not send its call: it adds the request to the batch being gathered and waits for its
reply. A batch is submitted once ``max_requests`` are gathered or no request has come for
``gather_seconds``; it is then polled, with back-off, until it ends, and each request's line
answers its call. The provider's shape is a :class:`BatchAPI` (:mod:`.openai_batch`: the
OpenAI Batch API and any server that serves ``/v1/batches``; :mod:`.anthropic_batch`:
Anthropic's Message Batches).

Everything else is the engine's, as for a live call: only calls missing from the cache reach
the backend, replies are cached once they validate, a reply that does not validate is
re-asked (in a later batch), a line that failed or expired raises a retryable error and is
submitted again within the retry budget, and the ledger prices each call at the batch rate
(``price_key`` ends in ``@batch``). The backend declares no per-call timeout, and as many
calls in flight as a batch holds.

Every batch is written in a :class:`~contextlens.engine.batchlog.BatchLog` as it is created:
a run stopped, killed or started again finds its requests there and waits for the batches
they are in, and submits nothing twice. Stopped with Ctrl-C, the batches keep running at the
provider; the same command collects them later, ``contextlens batches --judge JUDGE
--cancel`` cancels them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from contextlens.backend import (
    BackendError,
    ChatBackend,
    Completion,
    FatalError,
    Message,
    ReplyFormat,
    TransientError,
)
from contextlens.engine.accounting import batch_price_key
from contextlens.engine.batchlog import BatchLog, BatchLogError
from contextlens.redact import logger
from contextlens.sync import PerLoop

__all__ = [
    "DEFAULT_GATHER_SECONDS",
    "DEFAULT_MAX_REQUESTS",
    "BatchAPI",
    "BatchBackend",
    "BatchLine",
    "BatchState",
    "count_in",
    "followed",
    "request_id",
    "text_field",
]

log = logger("contextlens.judge")

#: Requests in one batch at most (OpenAI takes 50,000, Anthropic 100,000).
DEFAULT_MAX_REQUESTS = 10_000
#: Seconds without a new request after which the batch gathered so far is submitted.
DEFAULT_GATHER_SECONDS = 1.0
#: The first wait between two polls of a batch, its growth and its cap, in seconds.
POLL_SECONDS, POLL_GROWTH, POLL_MAX_SECONDS = 1.0, 1.5, 60.0


@dataclass(frozen=True)
class BatchState:
    """Where a batch is: the provider's own word for it (``status``), whether it has ended
    (its results can be read) and the counts it gives (done, failed, total)."""

    batch_id: str
    status: str
    ended: bool
    done: int = 0
    failed: int = 0
    total: int = 0

    def __str__(self) -> str:
        counts = f", {self.done}/{self.total} done" if self.total else ""
        failed = f", {self.failed} failed" if self.failed else ""
        return f"batch {self.batch_id}: {self.status}{counts}{failed}"


@dataclass(frozen=True)
class BatchLine:
    """One request's outcome in an ended batch: its reply, or the error it ended with."""

    reply: Completion | None = None
    error: BackendError | None = None


class BatchAPI(Protocol):
    """One provider's batch endpoints, as :class:`BatchBackend` uses them."""

    @property
    def key(self) -> str:
        """The provider's API, account and model: requests are logged under it."""
        ...

    @property
    def live(self) -> ChatBackend:
        """The live backend the requests are built like (its name, model and parameters
        make the cache key, so that a batched reply serves a live run and the other way)."""
        ...

    def request(
        self, messages: Sequence[Message], schema: type[BaseModel] | None
    ) -> dict[str, Any]:
        """The body of one request, as the batch sends it."""
        ...

    def refused(self, request: Mapping[str, Any], error: BackendError) -> BackendError:
        """``error`` as a live call of ``request`` would raise it (a refused reply format
        steps down to the next)."""
        ...

    async def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> str:
        """Create a batch of ``(custom id, body)`` requests; its id."""
        ...

    async def state(self, batch_id: str) -> BatchState:
        """Where the batch is now."""
        ...

    async def results(self, batch_id: str) -> dict[str, BatchLine]:
        """The outcome of each request of an ended batch, by custom id."""
        ...

    async def cancel(self, batch_id: str) -> BatchState:
        """Ask the provider to cancel the batch; where it is then."""
        ...

    async def aclose(self) -> None:
        """Close what the API holds open (its HTTP session)."""
        ...


def text_field(data: Mapping[str, Any], name: str, where: str) -> str:
    """The non-empty text ``data[name]`` of a provider's reply, else a :class:`FatalError`
    saying ``where`` it was missing."""
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise FatalError(f"{where}: the reply has no {name}")
    return value


def count_in(counts: Any, name: str) -> int:
    """The count ``counts[name]`` of a provider's request counts (0 when it is not a whole
    number, or ``counts`` is not a mapping)."""
    value = counts.get(name) if isinstance(counts, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def request_id(endpoint: str, body: Mapping[str, Any]) -> str:
    """A request's custom id: 40 hex digits of a SHA-256 of the endpoint (a backend's key) and
    the body (the same call gives the same id in every run; ids fit every provider's
    pattern)."""
    data = json.dumps([endpoint, body], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:40]


#: The last state of every batch followed in this process, by (backend key, batch id).
_followed: dict[tuple[str, str], BatchState] = {}


def followed() -> list[BatchState]:
    """The last state polled of each batch this process follows now (what progress shows)."""
    return list(_followed.values())


@dataclass
class _Batches:
    """The batching of one event loop: calls waiting, requests gathered, batches watched."""

    waiting: dict[str, asyncio.Future[Completion]] = field(default_factory=dict)
    gathered: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    last_added: float = 0.0
    flusher: asyncio.Task[None] | None = None
    watchers: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    running: dict[str, BatchState] = field(default_factory=dict)
    said: bool = False


class BatchBackend(ChatBackend):
    """A chat backend whose calls go into a provider's batches (see the module docstring).

    Args:
        api: the provider's batch API (:class:`~contextlens.judges.openai_batch.OpenAIBatches`,
            :class:`~contextlens.judges.anthropic_batch.AnthropicBatches`).
        log: where batches are logged (default the :class:`BatchLog` beside the default
            cache); ``False``: nowhere, so a stopped run cannot reattach.
        max_requests: requests in one batch at most; also the calls in flight.
        gather_seconds: a batch is submitted once no request came for this long.
        poll_seconds: the first wait between polls (it grows 1.5x a poll, up to a minute).
    """

    timeout = None  # a batch takes minutes to hours: no per-call timeout
    batched = True

    def __init__(
        self,
        api: BatchAPI,
        *,
        log: BatchLog | bool | None = None,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        gather_seconds: float = DEFAULT_GATHER_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {max_requests}")
        if gather_seconds < 0 or poll_seconds <= 0:
            raise ValueError("gather_seconds must be >= 0 and poll_seconds > 0")
        self.api = api
        live = api.live  # what it is, the live backend's (the cache key is made of these)
        self.name, self.model = live.name, live.model
        self.formats: ReplyFormat | None = live.formats
        self.max_tokens = live.max_tokens
        self.concurrency = self.max_requests = max_requests  # a batch's worth in flight
        self.gather_seconds = gather_seconds
        self.poll_seconds = poll_seconds
        self.log = _opened(log)
        self._loops: PerLoop[_Batches] = PerLoop(_Batches)

    def __repr__(self) -> str:
        return f"BatchBackend({self.api!r})"

    @property
    def key(self) -> str:
        return self.api.key

    @property
    def params(self) -> Mapping[str, Any]:
        return self.api.live.params

    @property
    def use_structured_output(self) -> bool:
        return self.api.live.use_structured_output

    @property
    def constrained(self) -> bool:
        return self.api.live.constrained

    @property
    def price_key(self) -> str | None:
        return batch_price_key(self.api.live.price_key)

    def preflight(self) -> None:
        self.api.live.preflight()

    async def aclose(self) -> None:
        await self.api.aclose()

    # -- the batches logged ------------------------------------------------------------

    async def logged(self) -> list[BatchState]:
        """The batches the log holds for this backend that have not been read, each as the
        provider says it is now."""
        if self.log is None:
            return []
        return [await self.api.state(b.batch_id) for b in self.log.batches(self.key)]

    async def cancel_logged(self) -> list[BatchState]:
        """Cancel the batches :meth:`logged` lists that have not ended; where each is then.
        Their requests are forgotten: a later run submits them again."""
        out: list[BatchState] = []
        for state in await self.logged():
            if not state.ended:
                state = await self.api.cancel(state.batch_id)
            if self.log is not None:
                self.log.close_batch(self.key, state.batch_id)
            out.append(state)
        return out

    # -- calls -------------------------------------------------------------------------

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        """The reply to this call, once the batch it is in has ended."""
        body = self.api.request(messages, schema)
        rid = request_id(self.key, body)
        batches = self._loops.get()
        future = batches.waiting.get(rid)
        if future is None:
            future = batches.waiting[rid] = asyncio.get_running_loop().create_future()
            logged = self.log.batch_of(self.key, rid) if self.log is not None else None
            if logged is not None:  # submitted by an earlier run: its batch answers it
                batches.members.setdefault(logged, set()).add(rid)
                self._watch(batches, logged)
            else:
                batches.gathered.append((rid, body))
                batches.last_added = time.monotonic()
                if batches.flusher is None or batches.flusher.done():
                    batches.flusher = asyncio.ensure_future(self._flush_when_gathered(batches))
        try:
            reply = await asyncio.shield(future)
        except asyncio.CancelledError:
            self._say_running(batches)
            raise
        except BackendError as exc:
            raise self.api.refused(body, exc) from None
        return reply

    async def _flush_when_gathered(self, batches: _Batches) -> None:
        """Submit what is gathered once it is full or no request came for a while."""
        while batches.gathered:
            quiet = time.monotonic() - batches.last_added
            if len(batches.gathered) < self.max_requests and quiet < self.gather_seconds:
                await asyncio.sleep(self.gather_seconds - quiet)
                continue
            chunk = batches.gathered[: self.max_requests]
            del batches.gathered[: self.max_requests]
            await self._submit(batches, chunk)

    async def _submit(self, batches: _Batches, chunk: list[tuple[str, dict[str, Any]]]) -> None:
        try:
            batch_id = await self.api.submit(chunk)
        except Exception as exc:  # every call of the chunk fails as the submission did
            error = exc if isinstance(exc, BackendError) else TransientError(str(exc))
            log.info("%s: submitting a batch of %d failed: %s", self.key, len(chunk), error)
            for rid, _ in chunk:
                self._settle(batches, rid, error=error)
            return
        if self.log is not None:
            self.log.record(self.key, batch_id, [rid for rid, _ in chunk])
        batches.members.setdefault(batch_id, set()).update(rid for rid, _ in chunk)
        log.info("%s: batch %s submitted with %d requests", self.key, batch_id, len(chunk))
        self._watch(batches, batch_id)

    def _watch(self, batches: _Batches, batch_id: str) -> None:
        task = batches.watchers.get(batch_id)
        if task is None or task.done():
            batches.watchers[batch_id] = asyncio.ensure_future(self._follow(batches, batch_id))

    async def _follow(self, batches: _Batches, batch_id: str) -> None:
        """Poll the batch until it ends, then answer every call waiting on it."""
        wait = self.poll_seconds
        try:
            while True:
                try:
                    state = await self.api.state(batch_id)
                except BackendError as exc:
                    if not exc.retryable:
                        raise
                    log.info("%s: polling %s failed (%s); polling again", self.key, batch_id, exc)
                else:
                    if batches.running.get(batch_id) != state:
                        log.info("%s", state)
                    batches.running[batch_id] = state
                    _followed[(self.key, batch_id)] = state
                    if state.ended:
                        break
                await asyncio.sleep(wait)
                wait = min(POLL_MAX_SECONDS, wait * POLL_GROWTH)
            lines = await self.api.results(batch_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the batch cannot be read: its calls are asked again
            error = TransientError(f"{batch_id} cannot be read: {exc}")
            log.warning("%s: %s cannot be read: %s", self.key, batch_id, error)
            if self.log is not None:
                self.log.close_batch(self.key, batch_id)
            self._answer(batches, batch_id, {}, error)
            return
        finally:
            batches.watchers.pop(batch_id, None)
            _followed.pop((self.key, batch_id), None)
        batches.running.pop(batch_id, None)
        self._answer(batches, batch_id, lines, None)

    def _answer(
        self,
        batches: _Batches,
        batch_id: str,
        lines: Mapping[str, BatchLine],
        error: BackendError | None,
    ) -> None:
        """Settle the calls waiting on ``batch_id`` from its ``lines``; a call without a line
        gets ``error`` (or one saying it had none). Failed lines are forgotten by the log,
        so that their calls may be submitted again."""
        failed = [rid for rid, line in lines.items() if line.reply is None]
        if failed and self.log is not None:
            self.log.forget(self.key, failed)
        for rid in batches.members.pop(batch_id, set()):
            line = lines.get(rid)
            if line is not None and line.reply is not None:
                self._settle(batches, rid, reply=line.reply)
                continue
            why = line.error if line is not None else error
            if why is None:
                why = TransientError(f"{batch_id} ended without a line for this request")
                if self.log is not None:
                    self.log.forget(self.key, [rid])
            self._settle(batches, rid, error=why)

    @staticmethod
    def _settle(
        batches: _Batches,
        rid: str,
        *,
        reply: Completion | None = None,
        error: BaseException | None = None,
    ) -> None:
        future = batches.waiting.pop(rid, None)
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(error)
            future.exception()  # retrieved: a call stopped meanwhile leaves no warning
        else:
            future.set_result(reply)  # type: ignore[arg-type]

    def _say_running(self, batches: _Batches) -> None:
        """Say once, when the run is stopped, which batches keep running."""
        running = sorted(batches.watchers)  # followed until their results are read
        if not running or batches.said:
            return
        batches.said = True
        log.warning(
            "stopped: %d batch(es) keep running at the provider (%s); run the same command "
            "again to collect their results (nothing is submitted twice), or `contextlens "
            "batches --judge JUDGE --cancel` (the run's judge) to cancel them",
            len(running),
            ", ".join(running),
        )


def _opened(log: BatchLog | bool | None) -> BatchLog | None:
    """The log ``log`` names (None, True: the default file); a default file that cannot be
    opened is said, and the run goes on without one."""
    if isinstance(log, BatchLog):
        return log
    if log is False:
        return None
    try:
        return BatchLog()
    except (BatchLogError, OSError, ValueError) as exc:
        warnings.warn(
            f"the batch log cannot be opened ({exc}); batches go on, but are not recorded: a "
            "run stopped would submit its calls again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
