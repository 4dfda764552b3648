"""agensight's documented ContextualRelevancyMetric example, with only the import changed.

Runs offline by default (no API key): the judge comes from the environment variable
CONTEXTLENS_JUDGE ("openai:gpt-4o-mini", "http://localhost:11434/v1#llama3.1", ...),
unset meaning the offline estimate. agensight documents a score of about 0.75 (every
statement relevant but the shipping one). Offline the score is 0.29: each chunk gets a
calibrated probability of bearing on the question, from its embedding similarity to the
question and the answer (fitted on TREC passage judgements, benchmarks/fit_relevance.py),
and only the chunk that states the return window is close to "What is your return
policy?" (p 1.00). The condition (cosine 0.20 to the question), the receipt requirement
(0.34) and the shipping policy (0.28) are short texts whose link to returns takes knowing
what a return policy holds, and at those similarities retrieved text of another topic is
the rule (p 0.00, 0.13, 0.03). This case is below what agensight documents; give the metric
a judge for it.
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
print(metric.score)  # agensight: e.g. 0.75; offline: 0.29 (1 of 4 chunks relevant)
print(metric.reason)  # e.g. "Most statements are relevant except for shipping info."
