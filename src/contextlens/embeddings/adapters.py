"""Turn a user's embedding model into an :class:`~contextlens.embeddings.base.Embedder`.

:func:`as_embedder` accepts, in this order of precedence:

* ``None``: the bundled offline model (:func:`~contextlens.embeddings.minilm.default_embedder`);
* an :class:`Embedder` (``name``, ``batches_concurrent_calls`` and ``async embed(texts)``):
  used as is; one with ``name`` and ``embed`` only, in a :class:`UserEmbedder` (its calls
  are not batched);
* a LangChain ``Embeddings`` (``embed_documents`` and ``embed_query``; ``aembed_documents``
  is preferred when present);
* a LlamaIndex ``BaseEmbedding`` (``aget_text_embedding_batch``, else
  ``get_text_embedding_batch``, ``get_text_embeddings`` or ``get_text_embedding``);
* a novastack ``BaseEmbedding`` (``embed_text(list[str]) -> list[list[float]]``).

The model is the user's and stays theirs: its blocking method is preferred and runs in a
worker thread, an async-only one runs on contextlens's own event loop
(:func:`contextlens.sync.call_user`), so one object serves any number of calls, loops and
threads. Concurrent requests of one event loop are gathered into one call of the model (at
most :data:`MAX_TEXTS_PER_CALL` texts). Every adapter checks the model's output (one finite,
non-zero row per text) and returns L2-normalised float32 rows, so a model that returns
unnormalised vectors still meets the protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from contextlens.embeddings.base import Embedder, l2_normalise
from contextlens.embeddings.batching import Coalescer
from contextlens.errors import ContextLensError
from contextlens.sync import PerLoop, call_user, in_thread

__all__ = [
    "InvalidEmbeddingError",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "NovastackEmbedder",
    "UserEmbedder",
    "as_embedder",
    "checked_vectors",
]

_MIN_NORM = 1e-12
#: Texts per call of a user's embedding model at most.
MAX_TEXTS_PER_CALL = 256
#: Vectors of recent texts kept per adapter and event loop, so a text shared by the cases of
#: different calls is embedded once.
MEMO_TEXTS = 4096
_ACCEPTED = (
    "None (the bundled offline model), a contextlens Embedder (name + async embed), "
    "a LangChain Embeddings (embed_documents + embed_query), a LlamaIndex embedding "
    "(aget_text_embedding_batch / get_text_embedding_batch / get_text_embeddings / "
    "get_text_embedding) or a novastack embedding (embed_text)"
)


class InvalidEmbeddingError(ContextLensError, ValueError):
    """An embedder returned something unusable: wrong shape, NaN/inf, or a zero vector.

    ``label`` names the offending text (e.g. ``"contexts[2]"``) when one text is to blame.
    """

    def __init__(self, message: str, *, label: str | None = None, text: str | None = None):
        super().__init__(message)
        self.label = label
        self.text = text


def _preview(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def checked_vectors(
    vectors: Any,
    texts: Sequence[str],
    source: str,
    labels: Sequence[str] | None = None,
) -> NDArray[np.float32]:
    """``vectors`` as L2-normalised float32 rows, after checking them against ``texts``.

    Raises :class:`InvalidEmbeddingError` when the output is not one finite row per text of
    one common width, or when a row is (numerically) zero: a zero vector has no direction,
    so no similarity can be computed from it. The error names the text by ``labels[i]``
    (default ``"texts[i]"``) and quotes its start.
    """
    try:
        m = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidEmbeddingError(f"{source}: output is not a numeric matrix ({exc})") from None
    if m.ndim != 2 or m.shape[0] != len(texts) or (len(texts) and m.shape[1] == 0):
        raise InvalidEmbeddingError(
            f"{source}: expected one vector per text ({len(texts)} rows), got shape {m.shape}"
        )
    if len(texts) == 0:
        return np.zeros((0, m.shape[1]), dtype=np.float32)

    def where(i: int) -> str:
        return labels[i] if labels is not None else f"texts[{i}]"

    bad = ~np.isfinite(m).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidEmbeddingError(
            f"{source} returned NaN or infinite values for {where(i)} ({_preview(texts[i])!r})",
            label=where(i),
            text=texts[i],
        )
    zero = np.linalg.norm(m, axis=1) <= _MIN_NORM
    if zero.any():
        i = int(np.argmax(zero))
        raise InvalidEmbeddingError(
            f"{source} returned a zero vector for {where(i)} ({_preview(texts[i])!r}); "
            "a zero vector has no direction, so no similarity can be computed",
            label=where(i),
            text=texts[i],
        )
    return l2_normalise(m)


def _model_label(prefix: str, model: Any) -> str:
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return f"{prefix}:{type(model).__name__}({value})"
    return f"{prefix}:{type(model).__name__}"


#: Attributes of a user's embedding model that change its vectors (LangChain, LlamaIndex and
#: novastack spell them variously).
_IDENTITY_ATTRIBUTES = (
    "model",
    "model_name",
    "deployment",
    "base_url",
    "openai_api_base",
    "api_base",
    "endpoint",
    "azure_endpoint",
    "dimensions",
    "embed_dim",
    "normalize",
    "normalize_embeddings",
    "encode_kwargs",
    "model_kwargs",
)


class UserEmbedder:
    """An embedder of the user's with ``name`` and ``async embed`` and nothing else declared:
    its concurrent calls are not batched. Its name and ``identity`` (when it has one) are its
    own, so its vectors are cached as they were without the adapter."""

    batches_concurrent_calls = False

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = str(inner.name)
        identity = getattr(inner, "identity", None)
        self.identity: dict[str, Any] = identity if isinstance(identity, dict) else {}

    def __repr__(self) -> str:
        return f"UserEmbedder({self.inner!r})"

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        vectors: NDArray[np.float32] = await self.inner.embed(texts)
        return vectors


class _Adapter:
    """Shared shell: ``name``, empty-input shortcut, batching of concurrent calls, checks."""

    prefix = "adapter"
    #: Concurrent calls of one loop share calls of the model.
    batches_concurrent_calls = True

    def __init__(self, model: Any, max_texts: int = MAX_TEXTS_PER_CALL) -> None:
        if max_texts < 1:
            raise ValueError(f"max_texts must be >= 1, got {max_texts}")
        self.model = model
        self.name = _model_label(self.prefix, model)
        self._coalescers = PerLoop(lambda: Coalescer(self._checked, max_texts, memo=MEMO_TEXTS))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    @property
    def identity(self) -> dict[str, Any]:
        """What changes the user model's vectors: its class, model name, endpoint, size and
        normalisation, as far as its attributes say."""
        found: dict[str, Any] = {"kind": self.prefix, "class": type(self.model).__qualname__}
        for attr in _IDENTITY_ATTRIBUTES:
            value = getattr(self.model, attr, None)
            if isinstance(value, (str, int, float, bool)) and not isinstance(value, type):
                found[attr] = value
            elif isinstance(value, dict) and attr.endswith("kwargs"):
                found[attr] = {
                    k: v for k, v in value.items() if isinstance(v, (str, int, float, bool))
                }
        return found

    async def _raw(self, texts: list[str]) -> Any:
        raise NotImplementedError

    async def _checked(self, texts: list[str]) -> NDArray[np.float32]:
        return checked_vectors(await self._raw(texts), texts, self.name)

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit-length float32 row per text."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not a single str")
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return await self._coalescers.get().embed(texts)


class LangChainEmbedder(_Adapter):
    """A LangChain ``Embeddings``: ``embed_documents`` in worker threads, taken as thread-safe
    as LangChain's own async twin takes it (``aembed_documents`` on contextlens's loop when it
    has only that)."""

    prefix = "langchain"

    async def _raw(self, texts: list[str]) -> Any:
        return await call_user(
            self.model, "embed_documents", "aembed_documents", texts, thread_safe=True
        )


class LlamaIndexEmbedder(_Adapter):
    """A LlamaIndex-style embedding: the first of ``get_text_embedding_batch``,
    ``get_text_embeddings``, ``get_text_embedding`` (per text) it has, in a worker thread;
    else ``aget_text_embedding_batch`` on contextlens's loop."""

    prefix = "llamaindex"

    async def _raw(self, texts: list[str]) -> Any:
        m = self.model
        for name in ("get_text_embedding_batch", "get_text_embeddings"):
            if callable(getattr(m, name, None)):
                return await in_thread(getattr(m, name), texts)
        one = getattr(m, "get_text_embedding", None)
        if callable(one):
            return await in_thread(lambda: [one(t) for t in texts])
        return await call_user(m, "get_text_embedding_batch", "aget_text_embedding_batch", texts)


class NovastackEmbedder(_Adapter):
    """A novastack ``BaseEmbedding``: ``embed_text(list[str])`` in a worker thread."""

    prefix = "novastack"

    async def _raw(self, texts: list[str]) -> Any:
        return await in_thread(self.model.embed_text, texts)


def _has(obj: Any, *names: str) -> bool:
    return all(callable(getattr(obj, n, None)) for n in names)


def as_embedder(obj: Any = None, *, max_texts: int = MAX_TEXTS_PER_CALL) -> Embedder:
    """An :class:`Embedder` for ``obj`` (see the module docstring for what is accepted);
    ``max_texts`` bounds the texts per call of a user's model.

    Raises:
        TypeError: ``obj`` is none of the accepted kinds; the message names its type.
    """
    if obj is None:
        from contextlens.embeddings.minilm import default_embedder

        return default_embedder()
    if isinstance(getattr(obj, "name", None), str) and _has(obj, "embed"):
        return obj if isinstance(obj, Embedder) else UserEmbedder(obj)
    if (_has(obj, "embed_documents") or _has(obj, "aembed_documents")) and _has(obj, "embed_query"):
        return LangChainEmbedder(obj, max_texts)
    if any(
        _has(obj, n)
        for n in (
            "aget_text_embedding_batch",
            "get_text_embedding_batch",
            "get_text_embeddings",
            "get_text_embedding",
        )
    ):
        return LlamaIndexEmbedder(obj, max_texts)
    if _has(obj, "embed_text"):
        return NovastackEmbedder(obj, max_texts)
    kind = type(obj)
    raise TypeError(
        f"cannot use {kind.__module__}.{kind.__qualname__} as an embedding model; "
        f"expected {_ACCEPTED}"
    )
