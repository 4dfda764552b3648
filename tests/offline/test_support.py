import asyncio

import numpy as np
import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.features import (
    CANDIDATES,
    CLAIM_COLUMNS,
    FEATURES,
    aggregate_many,
    claim_features,
    names,
)
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.support import SupportItem, score_support

CONTEXT = (
    "Our support team answers calls from Monday to Friday, 9am to 5pm. "
    "Orders over 50 euros ship for free. "
    "Refunds are issued within 14 days of receiving the returned item."
)
FAITHFUL = "Refunds are issued within 14 days after we receive the returned item."
CHANGED_NUMBER = "Refunds are issued within 30 days after we receive the returned item."
NEGATED = "Refunds are not issued after we receive the returned item."
INVENTED_NAME = "Refunds are issued within 14 days by our partner Klarna Payments in Sweden."


def score(reply: str, context: str = CONTEXT):
    [result] = asyncio.run(score_support([SupportItem(reply, [context])], default_embedder()))
    return result


def test_the_shipped_model_takes_the_extractor_features():
    model = load_model("support")
    n = len(FEATURES)
    assert model.features == FEATURES
    assert model.mean.shape == model.scale.shape == model.coef.shape == (n,)
    assert np.all(model.scale > 0) and np.isfinite(model.intercept)
    assert set(FEATURES) <= set(CANDIDATES)
    assert len(model.meta.get("trained_on", [])) == 9
    assert model.calibration is None  # select_support.py folds its Platt map into the coefficients
    held = model.meta["held_out"]
    natural = [r for r in held.values() if r["natural"]]
    assert len(natural) == 7 == len(model.meta["natural"])
    assert all(r["auroc"] > r["baseline_auroc"] for r in natural)


def test_model_round_trips_and_rejects_wrong_shapes():
    model = load_model("support")
    again = LogisticModel.from_dict(model.to_dict())
    x = np.random.default_rng(0).normal(size=(5, len(FEATURES)))
    assert np.allclose(again.predict(x), model.predict(x))
    with pytest.raises(ValueError, match="features"):
        model.predict(np.zeros((1, len(FEATURES) + 1)))


def test_one_claim_aggregates_to_its_own_features():
    rows = np.random.default_rng(1).uniform(size=(3, len(CLAIM_COLUMNS)))
    assert np.allclose(claim_features(rows[:1])[0], aggregate_many(rows[:1], np.array([0]))[0])
    assert claim_features(rows).shape == (3, len(CANDIDATES))


def test_names_skip_sentence_openers():
    assert names("The hotel is in Mumbai. Then NASA called.") == {
        "mumbai": "Mumbai",
        "nasa": "NASA",
    }


def test_faithful_paraphrase_is_supported_and_scores_are_probabilities():
    result = score(FAITHFUL)
    assert 0.0 <= result.score <= 1.0 and result.score >= 0.5
    assert all(0.0 <= c.support <= 1.0 for c in result.claims)


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        (CHANGED_NUMBER, lambda c: c.new_numbers == ("30",)),
        (NEGATED, lambda c: c.negation_mismatch),
        (INVENTED_NAME, lambda c: "Klarna" in c.new_names),
    ],
)
def test_a_changed_number_negation_or_invented_name_lowers_the_score(reply, found):
    good, bad = score(FAITHFUL), score(reply)
    assert bad.score < good.score - 0.1
    assert found(bad.claims[0])


def test_an_invented_name_is_named_in_the_reason():
    bad = score(INVENTED_NAME)
    assert bad.score < 0.5 and "Klarna" in bad.reason


def test_reason_names_the_least_supported_claim():
    result = score(f"{FAITHFUL} We also deliver on Sundays by drone to Antarctica.")
    assert result.score < 0.5
    assert "Least supported" in result.reason and "Antarctica" in result.reason


def test_empty_reply_and_missing_context_score_zero():
    empty, bare = asyncio.run(
        score_support([SupportItem("", [CONTEXT]), SupportItem(FAITHFUL, [""])], default_embedder())
    )
    assert empty.score == bare.score == 0.0 and "empty" in empty.reason
    assert "no context" in bare.reason


def test_opposite_wording_lowers_the_score_and_is_named():
    context = "Sales increased in the second quarter and the outlook is likely to improve."
    good = score("Sales increased in the second quarter.", context)
    bad = score("Sales decreased in the second quarter.", context)
    assert bad.score < good.score
    assert bad.claims[0].opposites == ("decreased",)


def test_semicolon_clauses_are_separate_claims():
    result = score("Refunds take 14 days; orders over 50 euros ship for free.")
    assert [c.sentence for c in result.claims] == [
        "Refunds take 14 days",
        "orders over 50 euros ship for free.",
    ]


def test_memoised_text_features_do_not_change_scores():
    from contextlens.offline.support import clear_caches

    first = score(INVENTED_NAME)
    clear_caches()
    assert score(INVENTED_NAME) == first


def _with_question(reply: str, question: str):
    item = SupportItem(reply, [CONTEXT], question=question)
    [result] = asyncio.run(score_support([item], default_embedder()))
    return result


def test_words_from_the_question_are_not_new_content_but_support_nothing():
    reply = "Orders over 50 euros ship for free, so your Lisbon order of 80 euros ships free."
    alone = score(reply)
    asked = _with_question(reply, "Does my Lisbon order of 80 euros ship for free?")
    assert "Lisbon" in alone.claims[0].new_names and "80" in alone.claims[0].new_numbers
    assert not asked.claims[0].new_names and not asked.claims[0].new_numbers
    assert asked.score > alone.score
    # Repeating the question is no evidence: an answer the context lacks stays unsupported.
    echo = _with_question(
        "Klarna Payments handles refunds.", "Does Klarna Payments handle refunds?"
    )
    assert echo.score < 0.5


def test_joint_facts_equal_the_union_of_each_sentences_facts():
    from contextlens.offline.features import facts, joint_facts

    found = (
        "Our Mon-Fri support line opens at 9:00; twenty agents answer.",
        "Refunds aren\u2019t issued after 1,000 days, İstanbul orders included.",
        "GANs and AI-based tools were not used.",
    )
    joint = joint_facts(found)
    each = [facts(s) for s in found]
    for field in ("words", "tokens", "numbers", "bigrams"):
        assert getattr(joint, field) == frozenset().union(*(getattr(f, field) for f in each))


@pytest.mark.parametrize(
    ("text", "figures", "words"),
    [
        ("Open 09:00 to 17:30.", {"9", "17", "17:30"}, set()),
        ("It costs $1,000.50, not 007 or 2.0.", {"1000.5", "7", "2"}, set()),
        ("Twenty-five agents, 24/7.", {"24", "7"}, {"20", "5"}),
        ("No figures here.", set(), set()),
    ],
)
def test_numbers_are_normalised_alike_alone_and_in_text_facts(text, figures, words):
    from contextlens.offline.features import facts
    from contextlens.offline.text import numbers

    assert numbers(text) == figures
    assert facts(text).numbers == figures | words


def test_a_model_for_other_features_is_refused_by_name():
    from contextlens.offline.relevance import ChunkFeatures, predict

    with pytest.raises(ValueError, match="'relevance' takes the features"):
        asyncio.run(
            score_support(
                [SupportItem(FAITHFUL, [CONTEXT])], default_embedder(), load_model("relevance")
            )
        )
    with pytest.raises(ValueError, match="'support' takes the features"):
        predict(ChunkFeatures([], np.zeros((0, 5))), load_model("support"))
