"""novastack's documented ContextSimilarityEvaluator example, with only the imports changed.

Runs offline: ``HuggingFaceEmbedding()`` is a model already on this machine when there is one
(a folder, or the Hugging Face cache), else the bundled all-MiniLM-L6-v2; nothing is
downloaded. Any LangChain, LlamaIndex or novastack embedding object can be passed as
``embed_model`` instead. Scores are in [0, 1]: in the default "cosine" mode, novastack's
cosine (0 where it would be negative).
"""

from contextlens import ContextSimilarityEvaluator, HuggingFaceEmbedding

embedding = HuggingFaceEmbedding()

evaluator = ContextSimilarityEvaluator(embed_model=embedding)

result = evaluator.evaluate(
    query="What is the capital of France?",
    generated_text="The capital of France is Paris.",
    contexts=["Paris is the capital city of France.", "France is in Europe."],
)

print(f"Query-Context Score: {result['query_context_similarity']['score']}")
print(f"Answer-Context Score: {result['answer_context_similarity']['score']}")
print(f"Combined Score: {result['score']}")
print(f"Passing: {result['passing']}")
