"""Near-duplicate chunks: found by cosine with single links, merged at the best rank."""

import asyncio

import numpy as np
import pytest

from contextlens.metrics.chunks import (
    DEFAULT_DUPLICATE_THRESHOLD,
    ChunkOptions,
    DuplicateGroup,
    chunk_units,
    duplicate_groups,
    merge,
)


class AxisEmbedder:
    """Each text's vector is given by the test (unit rows)."""

    name = "axes"

    def __init__(self, vectors):
        self.vectors = vectors
        self.calls = 0

    async def embed(self, texts):
        self.calls += 1
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def unit(*xs):
    v = np.array(xs, dtype=float)
    return v / np.linalg.norm(v)


def test_groups_are_single_link_components_at_the_level():
    vectors = {
        "a": unit(1, 0, 0),
        "b": unit(1, 0.3, 0),  # cos(a, b) ~ 0.958
        "c": unit(1, 0.62, 0),  # cos(b, c) ~ 0.97, cos(a, c) ~ 0.85
        "d": unit(0, 0, 1),
    }
    embedder = AxisEmbedder(vectors)
    groups = asyncio.run(duplicate_groups(["a", "d", "b", "c"], embedder, 0.95))
    assert [g.chunks for g in groups] == [[0, 2, 3]]
    assert groups[0].similarity == pytest.approx(0.958, abs=1e-3)
    assert asyncio.run(duplicate_groups(["a", "d", "b", "c"], embedder, 0.99)) == []
    # the same text twice is a duplicate whatever its vector
    same = AxisEmbedder({"x ": unit(1, 0), "x": unit(0, 1)})
    assert [g.chunks for g in asyncio.run(duplicate_groups(["x ", "x"], same, 0.99))] == [[0, 1]]


def test_merge_keeps_the_rank_of_the_best_member_and_every_text():
    chunks = [(0, "first"), (1, "second"), (2, "third"), (3, "second again")]
    units = merge(chunks, [DuplicateGroup(chunks=[1, 3], similarity=0.97)])
    assert [(u.indices, u.text) for u in units] == [
        ((0,), "first"),
        ((1, 3), "second\n\nsecond again"),
        ((2,), "third"),
    ]


def test_options_say_when_chunks_are_embedded():
    embedder = AxisEmbedder({"a": unit(1, 0), "b": unit(1, 0.01)})
    chunks = [(0, "a"), (5, "b")]
    units, groups = asyncio.run(chunk_units(chunks, ChunkOptions(), embedder))
    assert groups is None and embedder.calls == 0 and len(units) == 2
    units, groups = asyncio.run(chunk_units(chunks, ChunkOptions(0.9), embedder))
    assert [g.chunks for g in groups] == [[0, 5]] and len(units) == 2  # reported, not merged
    units, groups = asyncio.run(chunk_units(chunks, ChunkOptions(merge_duplicates=True), embedder))
    assert [u.indices for u in units] == [(0, 5)]
    assert ChunkOptions(merge_duplicates=True).threshold == DEFAULT_DUPLICATE_THRESHOLD
    for bad in (0, 1.2, True, "0.9"):
        with pytest.raises(ValueError, match="duplicate_threshold"):
            ChunkOptions(bad)
