import numpy as np

from contextlens.offline.windows import SHORT_CLAIM, claim_text, window, windows

SENTENCES = [
    "The shop opened in 1998.",
    "Returns are accepted within 30 days.",
    "A receipt is needed for every return.",
    "The cafe next door sells bagels.",
]


def test_the_closest_sentences_fill_the_window_in_document_order():
    sims = np.array([0.1, 0.9, 0.8, 0.2])
    assert window(sims, SENTENCES, budget=13) == f"{SENTENCES[1]} {SENTENCES[2]}"
    # the best sentence alone when the next would overflow
    assert window(sims, SENTENCES, budget=8) == SENTENCES[1]


def test_a_long_best_sentence_is_cut_to_the_budget():
    long = " ".join(["word"] * 50)
    assert window(np.array([1.0]), [long], budget=10) == " ".join(["word"] * 10)


def test_windows_take_unit_rows_and_an_empty_evidence_gives_empty_windows():
    claims = np.eye(4)[:2]
    evidence = np.eye(4)
    assert windows(claims, evidence, SENTENCES, budget=6) == [SENTENCES[0], SENTENCES[1]]
    assert windows(claims, np.zeros((0, 4)), []) == ["", ""]


def test_a_short_claim_is_read_with_its_question():
    question = "Which city is the head office of the Oberoi Group in?"
    assert claim_text("Delhi", question) == f"{question} Delhi"
    sentence = "The head office of the Oberoi Group is in Delhi, India."
    assert len(sentence.split()) > SHORT_CLAIM
    assert claim_text(sentence, question) == sentence
    assert claim_text("Delhi") == "Delhi"
