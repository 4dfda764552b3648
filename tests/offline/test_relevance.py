import asyncio

import numpy as np
import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.model import load_model
from contextlens.offline.query import (
    LEXICAL_FEATURES,
    answer_cue,
    answer_types,
    lexical_features,
    profile,
    rarity,
    stem,
)
from contextlens.offline.relevance import (
    FEATURES,
    MODEL,
    THRESHOLD,
    RelevanceItem,
    score_relevance,
    statement_relevance,
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


def lex(question, passage):
    return dict(zip(LEXICAL_FEATURES, lexical_features(question, passage), strict=True))


# --- the shipped model ----------------------------------------------------------------------


def test_shipped_model_loads_and_matches_the_extractor():
    model = load_model(MODEL)
    assert model.features == FEATURES
    assert np.all(np.isfinite(model.coef)) and np.isfinite(model.intercept)
    assert "grouped_cv" in model.meta
    # more similarity and more of the question's terms mean more relevance
    coef = dict(zip(model.features, model.coef, strict=True))
    assert coef["similarity"] + coef["best_similarity"] > 0
    assert coef["rarest"] > 0 and coef["answer_cue"] > 0


# --- behaviour ------------------------------------------------------------------------------


def test_on_topic_chunk_is_relevant_and_off_topic_is_not():
    [result] = run([RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC])])
    on, off = result.statements
    assert (on.chunk, off.chunk) == (0, 1)
    assert on.verdict == "yes" and off.verdict == "no"
    assert on.similarity > off.similarity and on.overlap > off.overlap
    assert result.chunk_relevance[0] > 0.5 > 0.2 > result.chunk_relevance[1]
    assert (result.relevant, result.total) == (1, 2)


@pytest.mark.parametrize(
    ("question", "answers", "repeats"),
    [
        (
            "when was the salvation army founded",
            "The Salvation Army was founded in London in 1865 by William Booth, a Methodist "
            "minister, and his wife Catherine.",
            "The Salvation Army. Find out about the Salvation Army and how it was founded. "
            "Visit our website to learn more about the salvation army.",
        ),
        (
            "how long is the life cycle of a flea",
            "The flea life cycle lasts from two weeks to eight months, depending on "
            "temperature and humidity; most fleas complete it in about three weeks.",
            "Flea life cycle. Learn about the life cycle of a flea. The life cycle of the "
            "flea is an interesting topic for pet owners.",
        ),
    ],
)
def test_a_chunk_that_answers_ranks_above_one_that_repeats_the_question(question, answers, repeats):
    [result] = run([RelevanceItem(question, [answers, repeats])])
    assert result.chunk_relevance[0] > result.chunk_relevance[1]


def test_off_topic_chunks_score_low():
    off = [
        OFF_TOPIC,
        "Preheat the oven to 200 degrees and bake the bread for thirty minutes.",
        "The committee approved the budget for the next fiscal year on Tuesday.",
    ]
    [result] = run([RelevanceItem(QUESTION, off)])
    assert max(result.chunk_relevance) < 0.2
    assert result.relevant == 0


def test_statements_are_the_sentences_of_each_chunk_and_blank_chunks_have_none():
    chunk = f"{ON_TOPIC} {OFF_TOPIC} Call us any time."
    [result] = run([RelevanceItem(QUESTION, ["", chunk, "   "])])
    assert [s.statement for s in result.statements] == [ON_TOPIC, OFF_TOPIC, "Call us any time."]
    assert {s.chunk for s in result.statements} == {1}
    assert result.chunk_relevance[0] == result.chunk_relevance[2] == 0.0
    # a statement is read in its chunk: all three share the chunk's similarity
    assert len({s.chunk_similarity for s in result.statements}) == 1
    # the on-topic sentence is the most relevant of its chunk
    assert max(result.statements, key=lambda s: s.relevance).statement == ON_TOPIC
    # the share of "yes" statements is the chunk's relevance, rounded
    assert result.relevant == round(result.chunk_relevance[1] * 3)


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


def test_input_without_content_words_still_gives_probabilities():
    [result] = run([RelevanceItem("is it?", [ON_TOPIC])])
    assert result.statements[0].overlap == 0.0
    assert 0.0 <= result.statements[0].relevance <= 1.0
    assert 0.0 <= result.chunk_relevance[0] <= 1.0


@pytest.mark.parametrize("chunks", [[], [""]])
def test_no_statements(chunks):
    [result] = run([RelevanceItem(QUESTION, chunks)])
    assert result.total == 0 and result.relevant == 0
    assert result.chunk_relevance == tuple(0.0 for _ in chunks)


# --- statements read in their chunk -----------------------------------------------------------


@pytest.mark.parametrize("p", [0.02, 0.2, 0.45, 0.55, 0.7, 0.97])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_share_of_yes_statements_is_the_chunk_relevance_rounded(p, n):
    sims = np.linspace(0.9, 0.1, n)
    rel = statement_relevance(p, sims)
    assert np.all((rel > 0) & (rel < 1))
    yes = rel >= THRESHOLD
    assert abs(yes.sum() - p * n) <= 0.5 + 1e-9
    # the best-matching statements are the "yes" ones
    assert np.all(np.diff(rel) <= 0)


def test_a_lone_statement_has_its_chunks_relevance():
    assert statement_relevance(0.37, np.array([0.2]))[0] == pytest.approx(0.37)


# --- lexical features -----------------------------------------------------------------------


def test_stem_joins_word_forms():
    assert len({stem(w) for w in ("cause", "causes", "caused", "causing")}) == 1
    assert stem("flies") == stem("fly")


def test_rare_terms_weigh_more():
    assert rarity("legionella") > rarity("pneumonia") > rarity("cause") > rarity("year")


def test_answer_types_follow_the_question_word():
    assert "number" in answer_types("how many calories are in an egg")
    assert "date" in answer_types("when was the salvation army founded")
    assert "person" in answer_types("who is robert gray")
    assert "definition" in answer_types("define visceral")
    assert "reason" in answer_types("why did the us enter ww1")
    assert answer_types("robert gray") == ()


def test_profile_drops_stop_words_and_question_fillers():
    assert profile("what is the definition of a sigmet").terms == ("sigmet",)


def test_rarest_term_is_the_one_that_counts():
    q = "does legionella cause pneumonia"
    assert profile(q).rarest == "legionella"
    assert lex(q, "Legionella is a bacterium.")["rarest"] == 1.0
    assert lex(q, "This can cause pneumonia.")["rarest"] == 0.0


def test_answer_cues_follow_the_question():
    q = "when was the salvation army founded"
    assert answer_cue(q, "The Salvation Army was founded in 1865 in London.") == 1.0
    assert answer_cue(q, "Learn how the Salvation Army was founded and grew.") == 0.0
    assert answer_cue("how many legs does a spider have", "Spiders have eight legs.") == 1.0
    assert answer_cue("define visceral", "Visceral refers to the internal organs.") == 1.0
    assert answer_cue("robert gray", "Robert Gray was born in 1755.") == 0.0


def test_length_is_clipped_to_the_fitted_range():
    q = "when was the salvation army founded"
    # lengths are clipped to the fitted range
    short, long = lex(q, "Founded."), lex(q, "word " * 1000)
    assert short["log_words"] == lex(q, "It was founded long ago.")["log_words"]
    assert long["log_words"] == lex(q, "word " * 500)["log_words"] > short["log_words"]
