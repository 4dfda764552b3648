"""novastack's documented ContextSimilarityEvaluator example, with only the imports changed.

Runs offline: ``HuggingFaceEmbedding()`` is a model already on this machine when there is one
(a folder, or the Hugging Face cache), else the bundled all-MiniLM-L6-v2; nothing is
downloaded. Any LangChain, LlamaIndex or novastack embedding object can be passed as
``embed_model`` instead. Scores are in [0, 1]: in the default "cosine" mode, novastack's
cosine (0 where it would be negative).

The score is a similarity, not a probability: its level is the embedder's (this case, an
answer and a passage that says the same in nearly the same words, reads 0.797). So with no
``score_threshold`` given, ``passing`` is None rather than a verdict at novastack's default
0.8 mark, which this embedder misses on nearly every case; give ``score_threshold=...`` (a mark chosen for your
embedder) and ``passing`` is ``score >= score_threshold``, as in novastack.
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
print(f"Passing: {result['passing']}")  # None: no score_threshold was given
