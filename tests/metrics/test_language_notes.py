"""A case with a text in a language the offline reader does not read says so, per case, and
the summary counts such items; a claim metric does not guess on an answer it cannot read."""

import asyncio
import json

import pytest

import contextlens.offline.language as language
import contextlens.offline.routes as routes
from contextlens import evaluate
from contextlens.embeddings.adapters import as_embedder
from contextlens.metrics.base import Services
from contextlens.metrics.context import ContextAwareness
from contextlens.metrics.faithfulness import FaithfulnessMetric
from contextlens.report import render_report
from contextlens.schemas import Batch, Dataset, ModelTestCase

CHUNKS = [
    "Limescale damage is not covered by the warranty.",
    "Returns are accepted within 30 days with a receipt.",
]
GERMAN = "Nein, Kalkschäden sind nicht von der Garantie abgedeckt."
FRENCH = "Non, les dégâts dus au calcaire ne sont pas couverts par la garantie."
ENGLISH = "No, limescale damage is not covered by the warranty."


@pytest.fixture(autouse=True)
def english_only(monkeypatch):
    """No multilingual embedder installed; the once-only warning armed afresh."""
    monkeypatch.setattr(routes, "multilingual_embedder", lambda: None)
    monkeypatch.setattr(language, "_warned", set())


def case(name, answer, chunks=CHUNKS, question="Is limescale damage covered?"):
    return ModelTestCase(name=name, input=question, actual_output=answer, retrieval_context=chunks)


def offline():
    return Services(judge=None, embedder=as_embedder(None))


@pytest.mark.parametrize(("answer", "language"), [(GERMAN, "German"), (FRENCH, "French")])
def test_an_answer_the_reader_cannot_read_needs_a_judge_and_says_why(answer, language):
    with pytest.warns(UserWarning, match="reads English only"):
        result = asyncio.run(FaithfulnessMetric().score(case("x", answer), offline()))
    assert result.score is None and result.error is None  # not a silent 0.06
    assert result.not_applicable.startswith("not applicable: needs a judge")
    assert f"the answer is in {language}" in result.not_applicable
    assert f"the answer is in {language}" in result.details.language
    assert "reads English only" in result.reason and "reads English only" in result.details.language


def test_an_english_answer_with_a_chunk_in_another_language_is_scored_with_a_note():
    chunks = [*CHUNKS, "Rücksendungen werden innerhalb von 30 Tagen angenommen."]
    result = asyncio.run(FaithfulnessMetric().score(case("x", ENGLISH, chunks), offline()))
    assert result.score is not None and result.not_applicable is None
    assert result.details.language.startswith("retrieval_context[2] is in German")
    assert "retrieval_context[2] is in German" in result.reason


def test_the_summary_counts_the_cases_with_a_language_note(tmp_path, run_cli):
    cases = [case("de", GERMAN), case("fr", FRENCH), case("en", ENGLISH)]
    with pytest.warns(UserWarning):
        run = evaluate(cases, ["faithfulness"], out=tmp_path / "out", progress=False)
    items = {i.case_id: i for i in run.iter_results()}
    assert items["en"].details.language is None and items["en"].score is not None
    assert "German" in items["de"].reason and "French" in items["fr"].reason
    summary = run.summary("faithfulness")
    assert (summary.n_not_english, summary.n_not_applicable, summary.n_scored) == (2, 2, 1)
    folder = tmp_path / "out" / "latest"
    written = json.loads((folder / "summary.json").read_text())["summaries"]["faithfulness"]
    assert written["n_not_english"] == 2
    assert "2 not English" in render_report(run)
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in cases))
    code, text = run_cli("run", path, "-m", "faithfulness", "--out", tmp_path / "o", "--no-store")
    assert code == 0, text
    assert "3 (2 n/a, 2 not English)" in text


def test_an_all_english_case_has_no_note():
    run = evaluate([case("en", ENGLISH)], ["faithfulness"], progress=False)
    [item] = run.iter_results()
    assert item.details.language is None and "English" not in (item.reason or "")
    assert run.summary("faithfulness").n_not_english == 0


def test_a_session_reply_in_another_language_needs_a_judge():
    session = Dataset(
        session_id="s",
        assistant_id="bot",
        context=" ".join(CHUNKS),
        conversation=[
            Batch(qa_id="q1", query="Is limescale covered?", assistant=ENGLISH),
            Batch(
                qa_id="q2",
                query="Ist der Kalkschaden von der Garantie abgedeckt?",
                assistant=GERMAN,
            ),
        ],
    )
    with pytest.warns(UserWarning):
        result = asyncio.run(ContextAwareness().score(session, offline()))
    english, german = result.details.interactions
    assert english.score is not None and "German" not in (english.reason or "")
    assert german.score is None and german.not_applicable.startswith(
        "not applicable: needs a judge"
    )
    assert "the reply and the query are in German" in german.reason
    assert "the reply and the query are in German" in result.details.language
    assert result.score == pytest.approx(english.score)
