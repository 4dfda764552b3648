"""as_embedder: LangChain, LlamaIndex and novastack adapters, output checks, errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from contextlens.embeddings import Embedder, default_embedder
from contextlens.embeddings.adapters import (
    InvalidEmbeddingError,
    LangChainEmbedder,
    LlamaIndexEmbedder,
    NovastackEmbedder,
    as_embedder,
    checked_vectors,
)

TEXTS = ["alpha", "beta", "gamma"]
RAW = {"alpha": [3.0, 4.0, 0.0], "beta": [0.0, 0.0, 2.0], "gamma": [1.0, 1.0, 1.0]}


def _unit(rows: Sequence[Sequence[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


class SyncLangChain:
    """LangChain-style, sync only; records the thread it ran on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return [RAW[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return RAW[text]


class AsyncLangChain(SyncLangChain):
    def __init__(self) -> None:
        super().__init__()
        self.async_calls = 0

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.async_calls += 1
        return [RAW[t] for t in texts]


class AsyncOnlyLangChain:
    """LangChain-style with only the async method; records the event loop it ran on."""

    def __init__(self) -> None:
        self.loops: list[object] = []

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.loops.append(asyncio.get_running_loop())
        return [RAW[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return RAW[text]


class LlamaBatch:
    model_name = "fake-llama"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def aget_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
        self.calls.append("aget_text_embedding_batch")
        return [RAW[t] for t in texts]

    def get_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
        self.calls.append("get_text_embedding_batch")
        return [RAW[t] for t in texts]


class LlamaSingle:
    def __init__(self) -> None:
        self.calls = 0

    def get_text_embedding(self, text: str) -> list[float]:
        self.calls += 1
        return RAW[text]


class NovastackLike:
    """novastack BaseEmbedding: embed_text plus an embed_documents(Document) that is not
    LangChain's (no embed_query), so it must not be taken for LangChain."""

    model_name = "fake-nova"

    def embed_text(self, input: str | list[str]) -> list[list[float]]:
        texts = [input] if isinstance(input, str) else input
        return [RAW[t] for t in texts]

    def embed_documents(self, documents: list[object]) -> list[object]:
        raise AssertionError("must not be called")


class ZeroFor:
    def __init__(self, zero: str) -> None:
        self.zero = zero

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[0.0, 0.0, 0.0] if t == self.zero else RAW[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return RAW[text]


def test_none_gives_the_shared_offline_model() -> None:
    assert as_embedder(None) is default_embedder()
    assert as_embedder() is default_embedder()


def test_an_embedder_is_used_as_is() -> None:
    emb = default_embedder()
    assert as_embedder(emb) is emb
    adapter = as_embedder(SyncLangChain())
    assert as_embedder(adapter) is adapter


async def test_langchain_deterministic_fake() -> None:
    lc = DeterministicFakeEmbedding(size=16)
    emb = as_embedder(lc)
    assert isinstance(emb, LangChainEmbedder) and isinstance(emb, Embedder)
    assert emb.name.startswith("langchain:DeterministicFakeEmbedding")
    out = await emb.embed(TEXTS)
    assert out.shape == (3, 16) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out, _unit(lc.embed_documents(TEXTS)), atol=1e-6)


async def test_langchain_runs_the_blocking_method_in_a_thread_even_when_async_exists() -> None:
    # A user's async client is bound to the loop that first used it; the blocking method
    # serves every loop and thread.
    a = AsyncLangChain()
    out = await as_embedder(a).embed(TEXTS)
    assert a.async_calls == 0 and a.threads and a.threads[0] != threading.get_ident()
    np.testing.assert_allclose(out, _unit([RAW[t] for t in TEXTS]), atol=1e-6)


def test_an_async_only_model_always_sees_one_loop_whatever_loop_calls_it() -> None:
    model = AsyncOnlyLangChain()
    emb = as_embedder(model)
    for _ in range(3):  # each asyncio.run is a new loop, as each sync call of contextlens is
        out = asyncio.run(emb.embed(TEXTS))
        np.testing.assert_allclose(out, _unit([RAW[t] for t in TEXTS]), atol=1e-6)
    assert len(model.loops) == 3 and len(set(map(id, model.loops))) == 1
    assert all(loop.is_running() for loop in model.loops)


async def test_llamaindex_batch_prefers_the_blocking_batch_method() -> None:
    m = LlamaBatch()
    emb = as_embedder(m)
    assert isinstance(emb, LlamaIndexEmbedder) and emb.name == "llamaindex:LlamaBatch(fake-llama)"
    out = await emb.embed(TEXTS)
    assert m.calls == ["get_text_embedding_batch"]
    np.testing.assert_allclose(out, _unit([RAW[t] for t in TEXTS]), atol=1e-6)


async def test_llamaindex_single_text_method() -> None:
    m = LlamaSingle()
    out = await as_embedder(m).embed(TEXTS)
    assert m.calls == 3
    np.testing.assert_allclose(out, _unit([RAW[t] for t in TEXTS]), atol=1e-6)


async def test_novastack_embed_text() -> None:
    emb = as_embedder(NovastackLike())
    assert isinstance(emb, NovastackEmbedder)
    out = await emb.embed(TEXTS)
    np.testing.assert_allclose(out, _unit([RAW[t] for t in TEXTS]), atol=1e-6)


async def test_empty_input_does_not_call_the_model() -> None:
    s = SyncLangChain()
    out = await as_embedder(s).embed([])
    assert out.shape[0] == 0 and s.threads == []


async def test_single_str_is_refused() -> None:
    with pytest.raises(TypeError, match="single str"):
        await as_embedder(SyncLangChain()).embed("alpha")


async def test_zero_vector_names_the_text() -> None:
    with pytest.raises(InvalidEmbeddingError, match=r"zero vector for texts\[1\] \('beta'\)"):
        await as_embedder(ZeroFor("beta")).embed(TEXTS)
    with pytest.raises(ValueError, match="zero vector"):  # it is a ValueError
        await as_embedder(ZeroFor("alpha")).embed(["alpha"])


def test_checked_vectors_shape_and_nan() -> None:
    with pytest.raises(InvalidEmbeddingError, match="one vector per text"):
        checked_vectors([[1.0, 0.0]], ["a", "b"], "m")
    with pytest.raises(InvalidEmbeddingError, match=r"NaN or infinite values for q"):
        checked_vectors([[1.0, float("nan")]], ["a"], "m", labels=["q"])
    out = checked_vectors([[3.0, 4.0]], ["a"], "m")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8]], atol=1e-7)


@pytest.mark.parametrize("obj", [object(), "minilm", 42, [1.0, 2.0]])
def test_anything_else_is_a_type_error_naming_the_type(obj: object) -> None:
    with pytest.raises(TypeError) as info:
        as_embedder(obj)
    msg = str(info.value)
    assert type(obj).__qualname__ in msg
    assert "LangChain" in msg and "LlamaIndex" in msg and "Embedder" in msg
