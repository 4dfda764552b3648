import asyncio

import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.citations import strip_citations
from contextlens.offline.support import SupportItem, score_support

CONTEXT = [
    "Returns are accepted within 30 days of purchase with a receipt.",
    "Orders over 50 euros ship for free within Germany.",
    "Our support line is open Monday to Friday, 9am to 5pm.",
]
FAITHFUL = "Returns are accepted within 30 days with a receipt. Orders over 50 euros ship free."


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("Refunds take 14 days (source: doc 3).", "Refunds take 14 days."),
        ("Refunds take 14 days [2].", "Refunds take 14 days."),
        ("It takes 14 days [1, 3] and ships free [doc 2].", "It takes 14 days and ships free."),
        ("Refunds take 14 days (Source 2; Source 4).", "Refunds take 14 days."),
        ("Refunds take 14 days【4†source】.", "Refunds take 14 days."),
        ("Refunds take 14 days [^1].", "Refunds take 14 days."),
        ("Refunds take 14 days. Source: doc 2", "Refunds take 14 days."),
        ("Refunds take 14 days.\n\nSources:\n- doc 1\n- doc 3", "Refunds take 14 days."),
        ("It takes 14 days.\n**References**\n1. https://example.org/a", "It takes 14 days."),
    ],
)
def test_markers_and_source_lists_are_removed(text, plain):
    assert strip_citations(text) == plain


@pytest.mark.parametrize(
    "text",
    [
        "The price (in 2019) was high.",
        "Use option (2) to continue.",
        "Returns (30 days) are free.",
        "The source of the Nile is in Burundi.",
    ],
)
def test_ordinary_parentheses_and_words_stay(text):
    assert strip_citations(text) == text


def support(reply: str) -> float:
    [result] = asyncio.run(score_support([SupportItem(reply, CONTEXT)], default_embedder()))
    return result.score


@pytest.mark.parametrize(
    "cited",
    [
        "Returns are accepted within 30 days with a receipt (source: doc 3). Orders over 50 "
        "euros ship free (source: doc 1).",
        "Returns are accepted within 30 days with a receipt [2]. Orders over 50 euros ship "
        "free [1].",
        f"{FAITHFUL}\n\nSources: doc 1, doc 2",
        f"{FAITHFUL}\nSources:\n- TechStore returns policy\n- TechStore shipping page",
    ],
)
def test_a_citation_marker_leaves_a_faithful_answers_score_within_005(cited):
    plain = support(FAITHFUL)
    assert plain >= 0.5
    assert abs(support(cited) - plain) <= 0.05


def test_a_reply_that_is_only_a_source_list_is_still_read():
    [result] = asyncio.run(
        score_support([SupportItem("Sources: doc 1", CONTEXT)], default_embedder())
    )
    assert result.claims and result.claims[0].sentence == "Sources: doc 1"
