"""A GGUF model run in this process by llama-cpp-python, as a chat backend (extra ``llama``).

``--judge llama:PATH.gguf`` (or ``LlamaCppBackend("PATH.gguf")``). The chat template comes
from the GGUF file; the reply schema becomes a grammar (``response_format={"type":
"json_object", "schema": ...}``), so every reply parses and fits the schema; ``max_tokens`` is
sized from the schema. Generation runs in a worker thread, so the event loop stays free, one
call at a time per model (llama.cpp serves one sequence per context): the backend's
``concurrency`` is 1 and the engine's limiter keeps to it. Cache, retries and accounting are
the engine's, as for any judge.

A call that times out is abandoned by the engine, but its generation runs on until it ends
(llama.cpp cannot be interrupted from outside): the next call starts after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contextlens.backend import ChatBackend, Completion, FatalError, Message, Usage
from contextlens.errors import MissingExtraError
from contextlens.files import describe_os_error
from contextlens.judges.formats import FormatNegotiation
from contextlens.judges.spec import JudgeSpec, backend_kind
from contextlens.sync import in_thread

__all__ = ["LlamaCppBackend"]

#: Seconds per call: a model on a CPU takes its time.
DEFAULT_TIMEOUT = 300.0


class LlamaCppBackend(ChatBackend):
    """Chat completions from a GGUF file, in process.

    Args:
        model_path: the ``.gguf`` file.
        n_ctx: context length in tokens (prompt and reply together).
        n_threads: CPU threads (llama.cpp's default: the physical cores).
        temperature, seed: sampling; greedy and fixed by default, so replies repeat.
        max_tokens: completion tokens per call; ``None`` sizes them from the reply schema.
        timeout: seconds per call (default 300).
        structured_output: ``"auto"`` or ``"json_object"`` (the schema as a grammar, the
            default), or ``"off"`` (the prompt alone).
        concurrency: accepted for spec strings; a model serves one call at a time.
        **llama_kwargs: passed to ``llama_cpp.Llama`` (``n_gpu_layers``, ``chat_format`` ...).
    """

    name = "llama-cpp"
    local = True
    #: One generation at a time per model (llama.cpp serves one sequence per context).
    concurrency = 1
    formats: FormatNegotiation
    timeout: float

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        temperature: float | None = 0.0,
        seed: int | None = 0,
        max_tokens: int | None = None,
        timeout: float | None = None,
        structured_output: str | None = None,
        concurrency: int | None = None,
        **llama_kwargs: Any,
    ) -> None:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"llama judge: no GGUF file at {str(path)!r}")
        try:
            import llama_cpp
        except ImportError as exc:
            raise MissingExtraError("llama-cpp-python", "llama") from exc
        self._llama_cpp = llama_cpp
        self.path = path.resolve()
        self.model = self.path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.timeout = timeout or DEFAULT_TIMEOUT
        mode = structured_output or "auto"
        self.formats = FormatNegotiation("json_object" if mode == "auto" else mode)
        self.llama_kwargs = llama_kwargs
        self._llama: Any = None
        self._lock = threading.Lock()  # one generation at a time, and one load

    def __repr__(self) -> str:
        return f"LlamaCppBackend({str(self.path)!r})"

    @property
    def key(self) -> str:
        return f"llama-cpp:{self.path}"

    @property
    def params(self) -> dict[str, Any]:
        """What changes replies besides the prompt (part of the cache key): the file (by
        path, size and modification time), sampling, and limits."""
        stat = self.path.stat()
        return {
            "model_file": [str(self.path), stat.st_size, int(stat.st_mtime)],
            "n_ctx": self.n_ctx,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "structured_output": self.formats.mode,
            "llama_kwargs": {k: repr(v) for k, v in sorted(self.llama_kwargs.items())},
        }

    def _model(self) -> Any:
        if self._llama is None:
            self._llama = self._llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed if self.seed is not None else self._llama_cpp.LLAMA_DEFAULT_SEED,
                verbose=False,
                **self.llama_kwargs,
            )
        return self._llama

    def _generate(self, request: dict[str, Any]) -> tuple[dict[str, Any], float]:
        with self._lock:
            llama = self._model()
            start = time.perf_counter()
            try:
                reply = llama.create_chat_completion(**request)
            except ValueError as exc:  # e.g. the prompt does not fit in n_ctx
                raise FatalError(f"llama.cpp: {exc}") from None
            return reply, time.perf_counter() - start

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        sent, options = self.formats.reply_options(schema, messages, self.max_tokens)
        prompt = self.formats.prompt_for(messages, schema, sent)
        request: dict[str, Any] = {"messages": [dict(m) for m in prompt]}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.seed is not None:
            request["seed"] = self.seed
        request.update(options)
        reply, latency = await in_thread(self._generate, request)
        try:
            text = reply["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise FatalError(f"llama.cpp reply has no message content: {reply!r}"[:300]) from None
        usage = reply.get("usage") or {}
        return Completion(
            text=text,
            usage=Usage(
                int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            ),
            latency=latency,
        )


#: The first bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"


def _check_file(spec: JudgeSpec) -> None:
    """A file that is not there, cannot be read or is not GGUF is said before any work
    (llama.cpp would refuse it on every item)."""
    path = Path(spec.target).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"llama judge: no GGUF file at {spec.target!r}")
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ValueError(
            f"llama judge: cannot read {spec.target!r}: {describe_os_error(exc)}"
        ) from None
    if head != GGUF_MAGIC:
        raise ValueError(
            f"llama judge: {spec.target!r} is not a GGUF file (it does not start with the "
            "bytes GGUF)"
        )


@backend_kind("llama", prefixes=("llama:",), check=_check_file, extra="llama")
def _llama(spec: JudgeSpec) -> LlamaCppBackend:
    """``llama:PATH.gguf``: a GGUF model run in this process by llama-cpp-python."""
    return LlamaCppBackend(spec.target, **spec.settings.given())
