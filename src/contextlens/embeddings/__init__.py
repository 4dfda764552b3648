"""Text embedders: the protocol and the offline default (all-MiniLM-L6-v2, int8 ONNX)."""

from contextlens.embeddings.adapters import as_embedder
from contextlens.embeddings.base import Embedder, l2_normalise
from contextlens.embeddings.minilm import MiniLMEmbedder, default_embedder

__all__ = ["Embedder", "MiniLMEmbedder", "as_embedder", "default_embedder", "l2_normalise"]
