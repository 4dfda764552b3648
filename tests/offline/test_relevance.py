import asyncio

import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.relevance import (
    THRESHOLD,
    RelevanceItem,
    relevance,
    score_relevance,
)

QUESTION = "How long does a refund take after I return an item?"
ON_TOPIC = "Refunds are issued within five business days after the returned item arrives."
OFF_TOPIC = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."


class CountingEmbedder:
    """The bundled embedder, counting ``embed`` calls and texts."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.calls: list[list[str]] = []

    async def embed(self, texts):
        self.calls.append(list(texts))
        return await self.inner.embed(texts)


def run(items, embedder=None):
    return asyncio.run(score_relevance(items, embedder or default_embedder()))


def test_on_topic_statement_is_relevant_and_off_topic_is_not():
    [result] = run([RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC])])
    on, off = result.statements
    assert (on.chunk, off.chunk) == (0, 1)
    assert on.verdict == "yes" and off.verdict == "no"
    assert on.relevance > off.relevance + 0.3
    assert on.similarity > off.similarity and on.overlap > off.overlap
    assert result.chunk_relevance[0] > result.chunk_relevance[1]
    assert (result.relevant, result.total) == (1, 2)


def test_statements_are_the_sentences_of_each_chunk_and_blank_chunks_have_none():
    chunk = f"{ON_TOPIC} {OFF_TOPIC} Call us any time."
    [result] = run([RelevanceItem(QUESTION, ["", chunk, "   "])])
    assert [s.statement for s in result.statements] == [
        ON_TOPIC,
        OFF_TOPIC,
        "Call us any time.",
    ]
    assert {s.chunk for s in result.statements} == {1}
    assert result.chunk_relevance[0] == result.chunk_relevance[2] == 0.0
    # a statement is read in its chunk: all three share the chunk's similarity
    assert len({s.chunk_similarity for s in result.statements}) == 1
    # the on-topic sentence is the most relevant of its chunk
    assert max(result.statements, key=lambda s: s.relevance).statement == ON_TOPIC


def test_one_embed_call_for_all_distinct_texts():
    embedder = CountingEmbedder()
    items = [RelevanceItem(QUESTION, [ON_TOPIC, ON_TOPIC]), RelevanceItem(QUESTION, [OFF_TOPIC])]
    results = run(items, embedder)
    assert len(embedder.calls) == 1
    [texts] = embedder.calls
    assert len(texts) == len(set(texts)) == 3  # question, on-topic, off-topic
    assert [r.total for r in results] == [2, 1]
    a, b = results[0].statements
    assert a.relevance == b.relevance


def test_no_texts_no_embed_call():
    embedder = CountingEmbedder()
    assert run([], embedder) == [] and embedder.calls == []


def test_relevance_rises_with_every_signal_and_is_a_probability():
    base = relevance(0.3, 0.3, 0.2)
    assert relevance(0.5, 0.3, 0.2) > base
    assert relevance(0.3, 0.5, 0.2) > base
    assert relevance(0.3, 0.3, 0.8) > base
    assert 0.0 < relevance(-1.0, -1.0, 0.0) < relevance(1.0, 1.0, 1.0) < 1.0
    assert relevance(0.0, 0.0, 0.0) < THRESHOLD < relevance(0.8, 0.8, 0.5)


def test_input_without_content_words_gives_zero_overlap():
    [result] = run([RelevanceItem("is it?", [ON_TOPIC])])
    assert result.statements[0].overlap == 0.0
    assert 0.0 <= result.statements[0].relevance <= 1.0


@pytest.mark.parametrize("chunks", [[], [""]])
def test_no_statements(chunks):
    [result] = run([RelevanceItem(QUESTION, chunks)])
    assert result.total == 0 and result.relevant == 0
    assert result.chunk_relevance == tuple(0.0 for _ in chunks)
