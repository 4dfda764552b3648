import asyncio
import warnings

import numpy as np
import pytest

import contextlens.offline.language as language
import contextlens.offline.routes as routes
from contextlens.embeddings.minilm import default_embedder
from contextlens.metrics.base import Services
from contextlens.metrics.context import ContextAwareness
from contextlens.metrics.context_precision import ContextPrecisionScorer
from contextlens.metrics.contextual_relevancy import ContextualRelevancyScorer
from contextlens.offline.language import declared_english, is_english, looks_english
from contextlens.schemas import Batch, Dataset, ModelTestCase

GERMAN_CONTEXT = (
    "Rücksendungen werden innerhalb von 30 Tagen mit Kassenbon angenommen. "
    "Bestellungen über 50 Euro werden kostenlos versendet."
)
GERMAN_REPLY = "Sie können Artikel innerhalb von 30 Tagen mit dem Kassenbon zurückgeben."
ENGLISH_CONTEXT = "Returns are accepted within 30 days with a receipt."


@pytest.mark.parametrize(
    ("text", "english"),
    [
        (GERMAN_REPLY, False),
        ("Les retours sont acceptés dans les 30 jours avec le reçu.", False),
        ("退货需在30天内凭收据办理，超过50美元的订单免运费。", False),
        ("Возврат возможен в течение 30 дней с чеком.", False),
        ("Returns are accepted within 30 days if you bring the receipt.", True),
        ("Mon-Fri 9am", None),
    ],
)
def test_looks_english(text, english):
    assert looks_english(text) is english


@pytest.mark.parametrize(
    ("name", "english"),
    [("english", True), ("en-GB", True), ("EN", True), ("german", False), ("de", False)],
)
def test_a_declared_language_is_read(name, english):
    assert declared_english(name) is english


def test_a_case_is_english_when_any_text_that_tells_reads_as_english():
    noisy_page = "Übersicht Kontakt Impressum Datenschutz Anmelden Registrieren Warenkorb Suche"
    assert is_english(["Refunds take 14 days after we receive the item.", noisy_page])
    assert not is_english([GERMAN_REPLY, GERMAN_CONTEXT])
    assert not is_english([ENGLISH_CONTEXT], language="german")
    assert is_english(["Ja.", "Nein."])  # too short to tell


@pytest.fixture
def english_only(monkeypatch):
    """No multilingual embedder installed; the once-only warning armed afresh."""
    monkeypatch.setattr(routes, "multilingual_embedder", lambda: None)
    monkeypatch.setattr(language, "_warned", set())


def services():
    return Services(judge=None, embedder=default_embedder())


def session(context, reply, lang="english"):
    return Dataset(
        session_id="s",
        assistant_id="a",
        language=lang,
        context=context,
        conversation=[Batch(qa_id="q1", query="Rückgabe?", assistant=reply)],
    )


def test_without_the_extra_a_german_session_says_it_was_read_by_an_english_only_scorer(
    english_only,
):
    metric = ContextAwareness()
    with pytest.warns(UserWarning, match="reads English only") as caught:
        result = asyncio.run(metric.score(session(GERMAN_CONTEXT, GERMAN_REPLY), services()))
        again = asyncio.run(metric.score(session(GERMAN_CONTEXT, GERMAN_REPLY), services()))
    assert len([w for w in caught if "English only" in str(w.message)]) == 1  # once
    for r in (result, again):
        assert "reads English only" in r.details.language
        assert "reads English only" in r.details.interactions[0].reason


def test_an_english_session_says_nothing_about_language(english_only):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = asyncio.run(
            ContextAwareness().score(
                session(ENGLISH_CONTEXT, "Returns are accepted within 30 days."), services()
            )
        )
    assert result.details.language is None
    assert result.details.offline_model in routes.SUPPORT_MODELS


def test_without_the_extra_other_metrics_say_so_too(english_only):
    case = ModelTestCase(
        input="Wie lange kann ich Artikel zurückgeben?",
        actual_output=GERMAN_REPLY,
        expected_output="Innerhalb von 30 Tagen mit Kassenbon.",
        retrieval_context=[GERMAN_CONTEXT],
    )
    with pytest.warns(UserWarning, match="reads English only"):
        precision = asyncio.run(ContextPrecisionScorer().score(case, services()))
        relevancy = asyncio.run(ContextualRelevancyScorer().score(case, services()))
    for r in (precision, relevancy):
        assert "reads English only" in r.details.language
        assert "reads English only" in r.reason


def test_the_reader_is_told_in_typed_details_by_every_offline_metric(english_only):
    from contextlens.metrics.base import ReaderDetails
    from contextlens.metrics.context_precision_ranked import RankedPrecisionMetric
    from contextlens.metrics.context_recall import ContextRecallMetric
    from contextlens.metrics.faithfulness import FaithfulnessMetric

    case = ModelTestCase(
        input="Wie lange kann ich Artikel zurückgeben?",
        actual_output=GERMAN_REPLY,
        expected_output="Innerhalb von 30 Tagen mit Kassenbon.",
        retrieval_context=[GERMAN_CONTEXT],
    )
    metrics = [
        ContextPrecisionScorer(),
        ContextualRelevancyScorer(),
        FaithfulnessMetric(),
        ContextRecallMetric(),
        RankedPrecisionMetric(),
    ]
    with pytest.warns(UserWarning, match="reads English only"):
        results = [asyncio.run(m.score(case, services())) for m in metrics]
    for metric, r in zip(metrics, results, strict=True):
        assert isinstance(r.details, ReaderDetails), metric
        assert not r.details.model_extra, metric  # declared fields, not loose keys
        assert r.details.offline_model and r.details.offline_model_is, metric
        assert "reads English only" in r.details.language, metric
        assert "reads English only" in r.reason, metric
        assert r.details.model_dump()["language"] == r.details.language


class FakeMultilingual:
    """Stands in for multilingual-e5-small: one fixed vector per word set."""

    name = "fake-multilingual"

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed(self, texts):
        self.texts.extend(texts)
        rng = np.random.default_rng(0)
        base = rng.normal(size=64)
        rows = [base + 0.1 * np.random.default_rng(len(t)).normal(size=64) for t in texts]
        m = np.asarray(rows, dtype=np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_with_the_extra_a_german_session_is_read_with_the_multilingual_embedder(monkeypatch):
    from contextlens.offline.model import load_model

    try:
        load_model("support_multilingual")
    except ValueError:
        pytest.skip("offline/weights/support_multilingual.json is not shipped")
    fake = FakeMultilingual()
    monkeypatch.setattr(routes, "multilingual_embedder", lambda: fake)
    result = asyncio.run(
        ContextAwareness().score(session(GERMAN_CONTEXT, GERMAN_REPLY, "german"), services())
    )
    assert result.details.offline_model == "multilingual"
    assert GERMAN_REPLY in fake.texts and result.error is None
    assert 0.0 <= result.score <= 1.0


def test_a_session_read_by_several_routes_names_every_reader():
    english, other = routes.Route("features"), routes.Route("features", "not English")
    assert routes.reader_details([english, other, english]) == {
        "offline_model": "features",
        "offline_model_is": routes.DESCRIPTIONS["features"],
        "language": "not English",
    }
    mixed = routes.reader_details([english, routes.Route("multilingual", "not English")])
    assert mixed["offline_model"] == "features, multilingual"
    assert routes.reader_details([]) == {}
