import asyncio

import numpy as np
import pytest

from contextlens.embeddings.base import embed_distinct
from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.query import (
    LEXICAL_FEATURES,
    MAX_QUERY_WORDS,
    MIN_QUERY_WORDS,
    lexical_features,
    profile,
    query_words,
    rarity,
    stem,
)
from contextlens.offline.relevance import (
    ANSWER_MODEL,
    CANDIDATES,
    MODEL,
    THRESHOLD,
    ChunkScore,
    RelevanceItem,
    RelevanceResult,
    answer_coverage,
    chunk_features,
    has_words,
    relevance_texts,
    score_relevance,
)

QUESTION = "How long does a refund take after I return an item?"
ON_TOPIC = "Refunds are issued within five business days after the returned item arrives."
OFF_TOPIC = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."
ANSWER = "Your refund arrives within five business days of us receiving the item."


class CountingEmbedder:
    """The bundled embedder, counting ``embed`` calls and texts."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.calls: list[list[str]] = []

    async def embed(self, texts):
        self.calls.append(list(texts))
        return await self.inner.embed(texts)


def run(items, embedder=None, model=None):
    return asyncio.run(score_relevance(items, embedder or default_embedder(), model))


def lex(question, passage):
    return dict(zip(LEXICAL_FEATURES, lexical_features(question, passage), strict=True))


# --- the shipped models -------------------------------------------------------------------


@pytest.mark.parametrize("name", [MODEL, ANSWER_MODEL])
def test_shipped_models_load_and_record_their_held_out_calibration(name):
    model = load_model(name)
    assert set(model.features) <= set(CANDIDATES) and model.features[0] == "similarity"
    assert np.all(np.isfinite(model.coef)) and np.isfinite(model.intercept)
    assert dict(zip(model.features, model.coef, strict=True))["similarity"] > 0
    meta = model.meta
    assert "fit_relevance.py" in meta["command"]
    assert meta["selection"]["chosen"] == list(model.features)
    held = meta["held_out"]
    assert set(held) == {"DL 2019", "DL 2020"}
    for source, figures in held.items():
        # leave-one-source-out: each source scored by the model fitted on the other
        assert figures["fitted_on"] != source
        assert figures["ece"] <= 0.10 and figures["auroc"] > 0.9
    # what the model cannot tell is recorded beside it
    assert meta["grade_0_check"]["grade_0_called_relevant"] > 0.5


def test_the_answer_model_reads_the_answer_and_the_other_does_not():
    assert "answer_similarity" in load_model(ANSWER_MODEL).features
    assert not any(f.startswith("answer") for f in load_model(MODEL).features)


# --- behaviour ------------------------------------------------------------------------------


def test_on_topic_chunk_is_relevant_and_off_topic_is_not():
    [result] = run([RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC])])
    on, off = result.chunks
    assert (on.chunk, off.chunk) == (0, 1)
    assert on.relevant and not off.relevant
    assert on.probability > THRESHOLD > 0.2 > off.probability
    assert on.similarity > off.similarity and on.answer_similarity is None
    assert (result.relevant, result.total) == (1, 2) and result.model == MODEL


def test_an_answer_is_read_by_the_answer_model():
    [plain, answered, dash] = run(
        [
            RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC]),
            RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC], ANSWER),
            RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC], "-"),  # a placeholder: no answer
        ]
    )
    assert (plain.model, answered.model, dash.model) == (MODEL, ANSWER_MODEL, MODEL)
    assert dash.chunk_relevance == plain.chunk_relevance
    on, off = answered.chunks
    assert on.answer_similarity is not None and on.answer_similarity > off.answer_similarity
    assert on.relevant and not off.relevant


def test_a_verdict_never_disagrees_with_its_probability():
    chunks = [ON_TOPIC, OFF_TOPIC, "Refunds go back to the card you paid with.", "Call us."]
    results = run([RelevanceItem(QUESTION, chunks), RelevanceItem(QUESTION, chunks, ANSWER)])
    for result in results:
        for c in result.chunks:
            assert c.relevant is (c.probability >= THRESHOLD)
        assert result.relevant == sum(len(c.statements) for c in result.chunks if c.relevant)


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
    [scored] = result.chunks
    assert scored.chunk == 1
    assert scored.statements == (ON_TOPIC, OFF_TOPIC, "Call us any time.")
    assert result.chunk_relevance[0] == result.chunk_relevance[2] == 0.0
    assert result.total == 3 and result.relevant in (0, 3)  # the chunk's verdict, all or none


def test_one_embed_call_for_all_distinct_texts():
    embedder = CountingEmbedder()
    items = [
        RelevanceItem(QUESTION, [ON_TOPIC, ON_TOPIC], ANSWER),
        RelevanceItem(QUESTION, [OFF_TOPIC]),
    ]
    results = run(items, embedder)
    assert len(embedder.calls) == 1
    [texts] = embedder.calls
    assert len(texts) == len(set(texts)) == 4  # question, answer, on-topic, off-topic
    a, b = results[0].chunks
    assert a.probability == b.probability


def test_no_texts_no_embed_call():
    embedder = CountingEmbedder()
    assert run([], embedder) == [] and embedder.calls == []


def test_list_features_read_each_chunk_against_the_best_of_its_list():
    items = [RelevanceItem(QUESTION, [OFF_TOPIC, ON_TOPIC, "", "Call us."], ANSWER)]
    vectors = asyncio.run(embed_distinct(default_embedder(), relevance_texts(items)))
    feats = chunk_features(items, vectors)
    assert feats.keys == [(0, 0), (0, 1), (0, 3)]
    col = {n: feats.columns((n,))[:, 0] for n in CANDIDATES}
    best = int(np.argmax(col["similarity"]))
    assert best == 1  # the refund chunk
    assert col["gap"][best] == 0.0 and np.all(col["gap"] <= 0)
    assert col["to_best"][best] == pytest.approx(1.0, abs=1e-5)
    assert np.all(col["answer_gap"] <= 0) and col["answer_gap"].max() == 0.0
    # without an answer its features are 0
    plain = chunk_features([RelevanceItem(QUESTION, [ON_TOPIC])], vectors)
    assert np.all(plain.columns(("answer_similarity", "answer_gap", "answer_coverage")) == 0)


def test_answer_coverage_counts_the_answers_own_terms():
    q = "how long is the legionella test valid"
    assert answer_coverage(q, "The legionella test stays valid for six months.", "Six months.") > 0
    # the input's own terms do not count: only what the answer adds
    assert answer_coverage(q, "The legionella test is valid.", "Legionella test valid.") == 0.0
    assert answer_coverage(q, "", "anything") == 0.0


def test_has_words():
    assert has_words("It is.") and has_words("42")
    assert not has_words("-") and not has_words("") and not has_words(None)


def test_a_model_on_other_candidate_features_can_score():
    model = LogisticModel(
        name="other",
        features=("similarity", "coverage"),
        mean=np.zeros(2),
        scale=np.ones(2),
        coef=np.array([4.0, 4.0]),
        intercept=-2.0,
    )
    [result] = run([RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC], ANSWER)], model=model)
    assert result.model == "other"
    assert result.chunk_relevance[0] > result.chunk_relevance[1]


def test_a_model_on_an_unknown_feature_is_refused():
    model = LogisticModel(
        name="unknown",
        features=("similarity", "answer_cue"),
        mean=np.zeros(2),
        scale=np.ones(2),
        coef=np.ones(2),
        intercept=0.0,
    )
    with pytest.raises(ValueError, match="answer_cue"):
        run([RelevanceItem(QUESTION, [ON_TOPIC])], model=model)


@pytest.mark.parametrize("chunks", [[], [""]])
def test_no_statements(chunks):
    [result] = run([RelevanceItem(QUESTION, chunks)])
    assert result.total == 0 and result.relevant == 0 and result.expected_share == 0.0
    assert result.chunk_relevance == tuple(0.0 for _ in chunks)


def test_expected_share_weighs_each_chunk_by_its_statements():
    result = RelevanceResult(
        (ChunkScore(0, 0.8, ("a", "b", "c"), 0.5), ChunkScore(1, 0.2, ("d",), 0.1)), 2, MODEL
    )
    assert result.expected_relevant == pytest.approx(3 * 0.8 + 0.2)
    assert result.expected_share == pytest.approx((3 * 0.8 + 0.2) / 4)
    assert (result.relevant, result.total) == (3, 4)
    assert result.chunk_relevance == (0.8, 0.2)


# --- lexical features -----------------------------------------------------------------------


def test_stem_joins_word_forms():
    assert len({stem(w) for w in ("cause", "causes", "caused", "causing")}) == 1
    assert stem("flies") == stem("fly")


def test_rare_terms_weigh_more():
    assert rarity("legionella") > rarity("pneumonia") > rarity("cause") > rarity("year")


def test_profile_drops_stop_words_and_question_fillers():
    assert profile("what is the definition of a sigmet").terms == ("sigmet",)


def test_rarest_term_is_the_one_that_counts():
    q = "does legionella cause pneumonia"
    assert profile(q).rarest == "legionella"
    assert lex(q, "Legionella is a bacterium.")["rarest"] == 1.0
    assert lex(q, "This can cause pneumonia.")["rarest"] == 0.0


def test_coverage_weighs_the_input_terms_by_rarity():
    q = "does legionella cause pneumonia"
    rare, less, common = (lex(q, t)["coverage"] for t in ("Legionella.", "Pneumonia.", "Cause."))
    assert 0.0 < common < less < rare < 1.0
    assert lex(q, "Legionella can cause pneumonia.")["coverage"] == pytest.approx(1.0)
    assert lex(q, "The Eiffel Tower is in Paris.")["coverage"] == 0.0
    assert lex("is it?", "It is.")["coverage"] == 0.0  # no content words


def test_input_length_is_clipped_to_the_fitted_range():
    assert profile("what is the definition of a sigmet").words == 7
    assert query_words("sigmet") == query_words("a sigmet") == np.log(MIN_QUERY_WORDS)
    long = " ".join(["word"] * (3 * MAX_QUERY_WORDS))
    assert query_words(long) == np.log(MAX_QUERY_WORDS)
    assert lex("what is the definition of a sigmet", "A SIGMET is a weather advisory.")[
        "query_words"
    ] == pytest.approx(np.log(7))


def test_length_is_clipped_to_the_fitted_range():
    q = "when was the salvation army founded"
    short, long = lex(q, "Founded."), lex(q, "word " * 1000)
    assert short["log_words"] == lex(q, "It was founded long ago.")["log_words"]
    assert long["log_words"] == lex(q, "word " * 500)["log_words"] > short["log_words"]


# --- the metric's score carries the chunk probabilities ----------------------------------------


def test_the_metrics_score_is_the_expected_share_of_relevant_statements():
    from contextlens.metrics.base import Services
    from contextlens.metrics.contextual_relevancy import ContextualRelevancyScorer
    from contextlens.schemas import ModelTestCase

    chunks = [f"{ON_TOPIC} Refunds go back to the card you paid with.", OFF_TOPIC]
    case = ModelTestCase(input=QUESTION, retrieval_context=chunks)
    services = Services(judge=None, embedder=default_embedder())
    result = asyncio.run(ContextualRelevancyScorer().score(case, services))
    details = result.details
    p = {c.index: c.probability for c in details.chunks}
    per_statement = [p[v.chunk] for v in details.verdicts]
    assert len(per_statement) == 3
    assert result.score == pytest.approx(sum(per_statement) / 3, abs=1e-3)
    assert details.expected_relevant == pytest.approx(sum(per_statement), abs=1e-3)
    # every statement shares its chunk's verdict, which is its probability at 0.5
    for v in details.verdicts:
        assert v.relevance == p[v.chunk] and (v.verdict == "yes") is (p[v.chunk] >= 0.5)
    for c in details.chunks:
        assert c.relevant is (c.probability >= 0.5)
        assert c.relevant_statements == (c.statements if c.relevant else 0)
    strict = asyncio.run(ContextualRelevancyScorer(strict_mode=True).score(case, services))
    yes = sum(v.verdict == "yes" for v in details.verdicts)
    assert strict.score == (1.0 if yes == 3 else 0.0)
