"""Retrieved chunks as the chunk-reading metrics score them, with near-duplicates found and,
when asked, merged.

Sliding-window chunking and retrievers that return one passage under several ids give
chunks that say the same thing twice. Scored one by one they distort the metrics that read
chunks (DeepEval #2594, #2788): a judge marks the second copy "not useful", which lowers a
ranked precision, and the same text costs its prompt tokens twice. :class:`ChunkOptions`
says what a metric does about them:

- ``duplicate_threshold=None`` (the default): nothing; no chunk is embedded for it.
- ``duplicate_threshold=t``: chunks whose embeddings have a cosine of ``t`` or more are
  near-duplicates; linked pairs form groups (single link: A~B and B~C make one group), each
  reported in the result's ``details.duplicates`` with its chunks' indices, best-ranked first.
- ``merge_duplicates=True`` (threshold :data:`DEFAULT_DUPLICATE_THRESHOLD` unless given):
  each group is scored as one chunk, at the rank of its best-ranked member, its text the
  members' texts in rank order (nothing any of them says is lost).

The embedder is the metric's (the run's unless the metric has its own), so with a judge the
bundled model embeds the chunks once for this and the judge is asked about the merged chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, model_validator

from contextlens.embeddings.base import Embedder, embed_distinct
from contextlens.metrics.config import SupportConfig

__all__ = [
    "DEFAULT_DUPLICATE_THRESHOLD",
    "ChunkOptions",
    "ChunkedConfig",
    "DuplicateGroup",
    "Unit",
    "chunk_units",
    "duplicate_groups",
    "merge",
]

#: The cosine at or above which two chunks are near-duplicates when merging is asked for
#: without a level (MiniLM gives 0.95 and more to a text and its reworded or re-cut copy).
DEFAULT_DUPLICATE_THRESHOLD = 0.95


class DuplicateGroup(BaseModel):
    """Chunks that say nearly the same: their indices in ``retrieval_context``, best-ranked
    first, and the lowest cosine of the links that join them."""

    chunks: list[int]
    similarity: float


@dataclass(frozen=True)
class Unit:
    """What a metric scores as one chunk: one retrieved chunk, or a merged group
    (``indices``: their positions in ``retrieval_context``, best-ranked first)."""

    indices: tuple[int, ...]
    text: str

    @property
    def first(self) -> int:
        return self.indices[0]


@dataclass(frozen=True)
class ChunkOptions:
    """What a chunk-reading metric does about near-duplicate chunks (see the module)."""

    duplicate_threshold: float | None = None
    merge_duplicates: bool = False

    def __post_init__(self) -> None:
        level = self.duplicate_threshold
        if level is not None and (
            isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level <= 1
        ):
            raise ValueError(f"duplicate_threshold must be in (0, 1], got {level!r}")

    @property
    def threshold(self) -> float | None:
        """The cosine level in use, or None when duplicates are not looked for."""
        if self.duplicate_threshold is not None:
            return float(self.duplicate_threshold)
        return DEFAULT_DUPLICATE_THRESHOLD if self.merge_duplicates else None


class ChunkedConfig(SupportConfig):
    """A metric that reads the retrieved chunks one by one: near-duplicates are reported
    from a cosine of ``duplicate_threshold`` (None: not looked for) and, with
    ``merge_duplicates``, scored as one chunk."""

    duplicate_threshold: float | None = None
    merge_duplicates: bool = False

    @model_validator(mode="after")
    def _valid_options(self) -> ChunkedConfig:
        ChunkOptions(self.duplicate_threshold, self.merge_duplicates)
        return self

    @property
    def chunk_options(self) -> ChunkOptions:
        return ChunkOptions(self.duplicate_threshold, self.merge_duplicates)


async def duplicate_groups(
    texts: Sequence[str], embedder: Embedder, threshold: float
) -> list[DuplicateGroup]:
    """The groups of near-duplicates among ``texts`` (cosine >= ``threshold``), each with its
    indices in order; texts that are equal after trimming spaces are always duplicates."""
    if len(texts) < 2:
        return []
    vectors = await embed_distinct(embedder, texts)
    rows = vectors.of(list(texts)).astype(np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    rows = rows / np.where(norms > 0, norms, 1.0)
    sims = rows @ rows.T
    same = [t.strip() for t in texts]
    parent = list(range(len(texts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    links: dict[tuple[int, int], float] = {}
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            cosine = 1.0 if same[i] == same[j] else float(min(sims[i, j], 1.0))
            if cosine >= threshold:
                links[(i, j)] = cosine
                a, b = root(i), root(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for i in range(len(texts)):
        members.setdefault(root(i), []).append(i)
    groups = []
    for indices in members.values():
        if len(indices) < 2:
            continue
        inside = [c for (i, j), c in links.items() if i in indices and j in indices]
        groups.append(DuplicateGroup(chunks=indices, similarity=round(min(inside), 4)))
    return sorted(groups, key=lambda g: g.chunks[0])


def merge(chunks: Sequence[tuple[int, str]], groups: Sequence[DuplicateGroup]) -> list[Unit]:
    """``chunks`` (index, text), each group of near-duplicates made one :class:`Unit` at the
    place of its best-ranked member, its text the members' texts joined in rank order."""
    group_of = {i: g for g in groups for i in g.chunks}
    text_of = dict(chunks)
    units: list[Unit] = []
    done: set[int] = set()
    for index, text in chunks:
        if index in done:
            continue
        group = group_of.get(index)
        if group is None:
            units.append(Unit((index,), text))
            continue
        members = [i for i in group.chunks if i in text_of]
        done.update(members)
        units.append(Unit(tuple(members), "\n\n".join(text_of[i] for i in members)))
    return units


async def chunk_units(
    chunks: Sequence[tuple[int, str]], options: ChunkOptions, embedder: Embedder
) -> tuple[list[Unit], list[DuplicateGroup] | None]:
    """The units a metric scores and the near-duplicate groups found (None when they were not
    looked for). ``chunks`` are (index in ``retrieval_context``, text), in rank order."""
    level = options.threshold
    if level is None:
        return [Unit((i,), t) for i, t in chunks], None
    found = await duplicate_groups([t for _, t in chunks], embedder, level)
    groups = [
        DuplicateGroup(chunks=[chunks[k][0] for k in g.chunks], similarity=g.similarity)
        for g in found
    ]
    if not options.merge_duplicates:
        return [Unit((i,), t) for i, t in chunks], groups
    return merge(chunks, groups), groups
