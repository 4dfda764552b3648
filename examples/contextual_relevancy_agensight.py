"""agensight's documented ContextualRelevancyMetric example, with only the import changed.

Runs offline by default (no API key): the judge comes from the environment variable
CONTEXTLENS_JUDGE ("openai:gpt-4o-mini", "http://localhost:11434/v1#llama3.1", ...),
unset meaning the offline estimate. agensight documents a score of about 0.75 (every
statement relevant but the shipping one). Offline, three of the four chunks are judged to
bear on the question too, so the score is 0.75, but the odd one out differs: the product's
condition ("unused, in original packaging") shares no word with the question and is far from
it in the embedding, while "Shipping Policy" shares "policy"; the estimate compares
embeddings and words and cannot know that a condition of return is part of a return policy.
"""

import os

from contextlens import ContextualRelevancyMetric, ModelTestCase

# Example: Return policy relevance
test_case = ModelTestCase(
    input="What is your return policy?",
    actual_output="You can return items within 30 days if unused.",
    retrieval_context=[
        "Return Policy: Items must be returned within 30 days of purchase",
        "Condition: Products must be unused and in original packaging",
        "Requirements: Original receipt must be presented",
        "Shipping Policy: Free shipping on orders over $50",
    ],
)

# Initialize the metric
metric = ContextualRelevancyMetric(
    threshold=0.7,
    model=os.getenv("CONTEXTLENS_JUDGE"),  # agensight's example: model="gpt-4o"
    include_reason=True,
)

# Evaluate
metric.measure(test_case)
print(metric.score)  # e.g. 0.75
print(metric.reason)  # e.g. "Most statements are relevant except for shipping info."
