import asyncio
import shutil

import numpy as np
import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.metrics.base import Services
from contextlens.metrics.context_precision import ContextPrecisionScorer
from contextlens.offline.reader import (
    VERDICTS,
    ClaimReader,
    ModelIntegrityError,
    claim_pairs,
    default_reader,
)
from contextlens.offline.reader_calibration import calibrated, calibration
from contextlens.offline.routes import resolve_support_model
from contextlens.offline.support import SupportItem, score_support, support_features
from contextlens.offline.support_reader import score_support_reader, verdicts
from contextlens.schemas import ModelTestCase

CONTEXT = (
    "The Oberoi Group is a hotel company with its head office in Delhi. "
    "It was founded in 1934 by Mohan Singh Oberoi. "
    "The group operates 31 luxury hotels in seven countries."
)
SUPPORTED = "The Oberoi Group was founded in 1934."
SWAPPED = "The Oberoi Group was founded in 1962."


def test_the_shipped_reader_is_checked_and_gives_a_distribution_over_its_verdicts():
    reader = default_reader()
    assert len(reader.card["sha256"]) == 64 and reader.card["held_out"]
    assert tuple(reader.card["verdicts"]) == VERDICTS
    p = reader.predict([(SUPPORTED, CONTEXT), (SWAPPED, CONTEXT)])
    assert p.shape == (2, 3) and np.all((p > 0) & (p < 1))
    assert p.sum(axis=1) == pytest.approx([1.0, 1.0])
    assert reader.predict([]).shape == (0, 3)


def test_a_pairs_probabilities_do_not_depend_on_its_batch():
    reader = default_reader()
    alone = reader.predict([(SUPPORTED, CONTEXT)])[0]
    batched = reader.predict([("A short one.", "Tiny."), (SUPPORTED, CONTEXT), ("x", CONTEXT)])
    # int8 activations are scaled per run, so a batch moves a probability a little, no more
    assert batched[1] == pytest.approx(alone, abs=0.05)


def test_a_changed_file_is_refused(tmp_path):
    reader = default_reader()
    copy = tmp_path / "model.onnx"
    shutil.copyfile(reader.model_path, copy)
    with copy.open("r+b") as f:
        f.seek(-100, 2)
        byte = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelIntegrityError, match="sha256"):
        ClaimReader(copy, sha256=reader.card["sha256"]).predict([(SUPPORTED, CONTEXT)])


def test_pairs_are_the_claims_with_their_windows_and_a_short_answer_takes_its_question():
    question = "Where is the head office of the Oberoi Group?"
    items = [SupportItem("Delhi.", [CONTEXT], question=question), SupportItem("", [CONTEXT])]
    first, empty = asyncio.run(claim_pairs(items, default_embedder()))
    [(claim, window)] = first.pairs
    assert claim == f"{question} Delhi." and "Delhi" in window
    assert empty.pairs == []


def test_a_claims_verdict_is_exactly_its_support_against_one_half():
    rows = np.array([[0.1, 0.3, 0.6], [0.9, 0.01, 0.09], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    supports = np.array([0.5, 0.4999, 0.2, 0.3])
    found = verdicts(supports, rows)
    assert found == ["supported", "not mentioned", "contradicted", "not mentioned"]


def test_the_calibration_rises_with_the_readers_support_and_a_one_claim_reply_agrees():
    (f,) = asyncio.run(support_features([SupportItem(SUPPORTED, [CONTEXT])], default_embedder()))
    low, low_claims = calibrated(np.array([[0.05, 0.9, 0.05]]), f)
    high, high_claims = calibrated(np.array([[0.97, 0.01, 0.02]]), f)
    assert 0 < low < high < 1
    assert low_claims[0] == pytest.approx(low) and high_claims[0] == pytest.approx(high)
    assert calibration().meta["held_out"]


def test_the_reader_reads_a_changed_figure_against_its_evidence():
    good, bad = asyncio.run(
        score_support_reader(
            [SupportItem(SUPPORTED, [CONTEXT]), SupportItem(SWAPPED, [CONTEXT])],
            default_embedder(),
        )
    )
    assert good.score > bad.score
    assert bad.claims[0].verdict in ("contradicted", "not mentioned")
    for result in (good, bad):  # a one-claim reply: its claim's support is its score
        assert result.claims[0].support == pytest.approx(result.score)
        assert (result.claims[0].verdict == "supported") == (result.score >= 0.5)
    assert bad.claims[0].new_numbers == ("1962",)
    # the evidence a report shows beside a claim: the same as the feature reader's
    (by_features,) = asyncio.run(
        score_support([SupportItem(SWAPPED, [CONTEXT])], default_embedder())
    )
    assert bad.claims[0].closest and bad.claims[0].closest in CONTEXT
    assert bad.claims[0].closest == by_features.claims[0].closest


def test_a_metric_takes_the_reader_as_an_option_and_says_which_model_read():
    services = Services(judge=None, embedder=default_embedder())
    case = ModelTestCase(input="", actual_output=SUPPORTED, context=[CONTEXT])
    by_default = asyncio.run(ContextPrecisionScorer().score(case, services))
    assert by_default.details.offline_model == "features"
    chosen = asyncio.run(ContextPrecisionScorer(support_model="reader").score(case, services))
    assert chosen.details.offline_model == "reader"
    assert "claim reader" in chosen.details.offline_model_is
    with pytest.raises(ValueError, match="support_model"):
        ContextPrecisionScorer(support_model="bert")


def test_the_environment_chooses_the_model_when_the_metric_does_not(monkeypatch):
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "reader")
    assert resolve_support_model(None) == "reader"
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
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "reader")
    from_env = [FaithfulnessMetric(), ContextRecallMetric()]
    chosen = FaithfulnessMetric(support_model="features")
    monkeypatch.delenv("CONTEXTLENS_SUPPORT_MODEL")  # made already: the setting stays
    for metric in from_env:
        result = asyncio.run(metric.score(case, services))
        assert result.details.offline_model == "reader", metric
    assert asyncio.run(chosen.score(case, services)).details.offline_model == "features"
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "bert")
    with pytest.raises(ValueError, match="bert"):
        FaithfulnessMetric()
