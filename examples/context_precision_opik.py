"""Opik's documented ContextPrecision example, with only the import changed.

Runs offline by default (no API key, no download). To use an LLM judge, set
CONTEXTLENS_JUDGE to a spec such as ``openai:gpt-4o-mini`` or
``http://localhost:11434/v1#llama3.1``, or pass a LangChain chat model as ``model=``.
"""

import os

from contextlens import ContextPrecision

metric = ContextPrecision(model=os.getenv("CONTEXTLENS_JUDGE"))  # None: the offline estimate

result = metric.score(
    input="What is the capital of France?",
    output="The capital of France is Paris. It is famous for its iconic Eiffel Tower and rich cultural heritage.",
    expected_output="Paris",
    context=[
        "France is a country in Western Europe. Its capital is Paris, which is known for landmarks like the Eiffel Tower."
    ],
)

print(result.value)
print(result.reason)
