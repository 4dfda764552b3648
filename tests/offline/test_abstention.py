"""The abstention detector: replies that make no checkable claim, and the claims it must not
mistake for them (a hedge followed by a claim, a "No, ..." answer)."""

import pytest

from contextlens.offline.abstention import abstention


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ("I'm sorry, I can only help with TechStore orders.", "out of scope"),
        ("That is outside what I can answer.", "out of scope"),
        ("This question is beyond my expertise.", "out of scope"),
        ("I'm afraid I can't help with that.", "refusal"),
        ("I cannot provide medical advice.", "refusal"),
        ("I don't know.", "does not know"),
        ("I’m not sure.", "does not know"),
        ("I couldn't find any information on that.", "does not know"),
        ("Unfortunately, the provided context does not mention the price.", "does not know"),
        ("I'm sorry, but I don't have that information. Please contact our support team.",
         "out of scope"),
        ("Hello! How can I help you today?", "greeting"),
        ("You're welcome! Have a great day.", "greeting"),
        ("Thanks for reaching out! Could you tell me more?", "question"),
        ("Could you tell me more?", "question"),
        ("Ich weiß es nicht.", "does not know"),
        ("Leider kann ich Ihnen dabei nicht helfen.", "refusal"),
        ("Es tut mir leid, dazu habe ich keine Informationen.", "does not know"),
        ("Je ne sais pas.", "does not know"),
        ("Désolé, je ne peux pas vous aider avec cela.", "refusal"),
        ("Lo siento, no tengo esa información.", "does not know"),
    ],
)  # fmt: skip
def test_a_reply_with_no_checkable_claim_abstains(reply, kind):
    assert abstention(reply) == kind


@pytest.mark.parametrize(
    "reply",
    [
        "I'm not sure, but returns are accepted within 30 days.",
        "I'm not sure, but returns are free.",
        "No, limescale damage is not covered.",
        "Nein, Kalkschäden sind nicht abgedeckt.",
        "No.",  # answers a yes/no question
        "Yes.",
        "Of course!",
        "We do not offer support for Linux.",
        "It is outside the warranty period.",
        "I can't help with returns because the item is damaged.",
        "I don't know the exact date, but it is usually in May.",
        "Returns are accepted within 30 days. Is there anything else I can help with?",
        "Thanks! Your order ships tomorrow.",
        "Hello, the store opens at nine.",
        "You should consult a doctor before taking it.",
        "Did you know that the museum is free on Sundays?",
        "How can artificial agents that worsen social dilemmas between many players be built?",
        "",
    ],
)
def test_a_reply_that_states_something_does_not_abstain(reply):
    assert abstention(reply) is None
