"""agensight's documented ContextualRelevancyMetric example, with only the import changed.

Runs offline by default (no API key): the judge comes from the environment variable
CONTEXTLENS_JUDGE ("openai:gpt-4o-mini", "http://localhost:11434/v1#llama3.1", ...),
unset meaning the offline estimate. agensight documents a score of about 0.75 (every
statement relevant but the shipping one). Offline the score is about 0.31: the estimate
reads the cosine of the question and each chunk, and only the chunk that states the return
window (p 0.73) is close to "What is your return policy?"; the receipt requirement (0.23),
the shipping policy (0.17) and the product's condition (0.11) are short texts whose link to
returns takes knowing what a return policy holds. Give the metric a judge for that.
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
print(metric.score)  # agensight: e.g. 0.75; offline: about 0.31
print(metric.reason)  # e.g. "Most statements are relevant except for shipping info."
