"""DeepEval's documented ContextualRelevancyMetric example, with only the import changed.

Runs offline by default (no API key): the judge comes from the environment variable
CONTEXTLENS_JUDGE ("openai:gpt-4o-mini", "http://localhost:11434/v1#llama3.1", ...),
unset meaning the offline estimate. The offline estimate compares embeddings; it cannot
reason that a 30-day refund answers "what if these shoes don't fit?", so it scores this
case lower than an LLM judge does.
"""

import os

from contextlens import ContextualRelevancyMetric, ModelTestCase

# Replace this with the actual output from your LLM application
actual_output = "We offer a 30-day full refund at no extra cost."

# Replace this with the actual retrieved context from your RAG pipeline
retrieval_context = ["All customers are eligible for a 30 day full refund at no extra cost."]

metric = ContextualRelevancyMetric(
    threshold=0.7,
    model=os.getenv("CONTEXTLENS_JUDGE"),  # DeepEval's example: model="gpt-4"
    include_reason=True,
)
test_case = ModelTestCase(
    input="What if these shoes don't fit?",
    actual_output=actual_output,
    retrieval_context=retrieval_context,
)

metric.measure(test_case)
print(metric.score)
print(metric.reason)
