import asyncio
import shutil

import numpy as np
import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.metrics.base import Services
from contextlens.metrics.context_precision import ContextPrecisionScorer
from contextlens.offline.crossencoder import (
    CrossEncoder,
    ModelIntegrityError,
    claim_pairs,
    default_cross_encoder,
)
from contextlens.offline.routes import resolve_support_model
from contextlens.offline.support import SupportItem, score_support
from contextlens.offline.support_ce import score_support_ce

try:
    default_cross_encoder()
except FileNotFoundError:
    pytest.skip("the cross-encoder is not shipped in this tree", allow_module_level=True)

CONTEXT = (
    "The Oberoi Group is a hotel company with its head office in Delhi. "
    "It was founded in 1934 by Mohan Singh Oberoi. "
    "The group operates 31 luxury hotels in seven countries."
)
SUPPORTED = "The Oberoi Group was founded in 1934."
SWAPPED = "The Oberoi Group was founded in 1962."


def test_the_shipped_model_is_checked_and_gives_probabilities():
    encoder = default_cross_encoder()
    assert len(encoder.card["sha256"]) == 64 and encoder.card["held_out"]
    p = encoder.predict([(SUPPORTED, CONTEXT), (SWAPPED, CONTEXT)])
    assert p.shape == (2,) and np.all((p > 0) & (p < 1))


def test_a_pairs_probability_does_not_depend_on_its_batch():
    encoder = default_cross_encoder()
    alone = encoder.predict([(SUPPORTED, CONTEXT)])[0]
    batched = encoder.predict([("A short one.", "Tiny."), (SUPPORTED, CONTEXT), ("x", CONTEXT)])
    # int8 activations are scaled per run, so a batch moves a probability a little, no more
    assert batched[1] == pytest.approx(alone, abs=0.01)
    assert encoder.predict([]).shape == (0,)


def test_a_changed_file_is_refused(tmp_path):
    encoder = default_cross_encoder()
    copy = tmp_path / "model.onnx"
    shutil.copyfile(encoder.model_path, copy)
    with copy.open("r+b") as f:
        f.seek(-100, 2)
        byte = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelIntegrityError, match="sha256"):
        CrossEncoder(copy, sha256=encoder.card["sha256"]).predict([(SUPPORTED, CONTEXT)])


def test_pairs_are_the_claims_with_their_windows_and_a_short_answer_takes_its_question():
    question = "Where is the head office of the Oberoi Group?"
    items = [SupportItem("Delhi.", [CONTEXT], question=question), SupportItem("", [CONTEXT])]
    first, empty = asyncio.run(claim_pairs(items, default_embedder()))
    [(claim, window)] = first.pairs
    assert claim == f"{question} Delhi." and "Delhi" in window
    assert empty.pairs == []


def test_the_cross_encoder_reads_a_changed_figure_against_its_evidence():
    good, bad = asyncio.run(
        score_support_ce(
            [SupportItem(SUPPORTED, [CONTEXT]), SupportItem(SWAPPED, [CONTEXT])],
            default_embedder(),
        )
    )
    assert good.score > bad.score
    assert bad.claims[0].new_numbers == ("1962",)
    # the evidence a report shows beside a claim: the same as the feature reader's
    (by_features,) = asyncio.run(
        score_support([SupportItem(SWAPPED, [CONTEXT])], default_embedder())
    )
    assert bad.claims[0].closest and bad.claims[0].closest in CONTEXT
    assert bad.claims[0].closest == by_features.claims[0].closest


def test_a_metric_takes_the_cross_encoder_as_an_option_and_says_so():
    services = Services(judge=None, embedder=default_embedder())
    case = {"output": SUPPORTED, "context": [CONTEXT]}
    metric = ContextPrecisionScorer(support_model="cross-encoder")
    result = asyncio.run(metric.score(case, services))
    assert result.details.offline_model == "cross-encoder"
    assert "cross-encoder" in result.details.offline_model_is
    with pytest.raises(ValueError, match="support_model"):
        ContextPrecisionScorer(support_model="bert")


def test_the_environment_chooses_the_model_when_the_metric_does_not(monkeypatch):
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "cross-encoder")
    assert resolve_support_model(None) == "cross-encoder"
    assert resolve_support_model("features") == "features"
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "nonsense")
    with pytest.raises(ValueError, match="nonsense"):
        resolve_support_model(None)


def test_the_environment_reaches_every_metric_that_reads_support_and_is_read_once(monkeypatch):
    from contextlens.metrics.context_recall import ContextRecallMetric
    from contextlens.metrics.faithfulness import FaithfulnessMetric
    from contextlens.schemas import ModelTestCase

    services = Services(judge=None, embedder=default_embedder())
    case = ModelTestCase(
        input="When was the Oberoi Group founded?",
        actual_output=SUPPORTED,
        expected_output=SUPPORTED,
        retrieval_context=[CONTEXT],
    )
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "cross-encoder")
    from_env = [FaithfulnessMetric(), ContextRecallMetric()]
    chosen = FaithfulnessMetric(support_model="features")
    monkeypatch.delenv("CONTEXTLENS_SUPPORT_MODEL")  # made already: the setting stays
    for metric in from_env:
        result = asyncio.run(metric.score(case, services))
        assert result.details.offline_model == "cross-encoder", metric
    assert asyncio.run(chosen.score(case, services)).details.offline_model == "features"
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "bert")
    with pytest.raises(ValueError, match="bert"):
        FaithfulnessMetric()
