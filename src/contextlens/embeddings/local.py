"""Sentence-embedding models already on this machine, found by path or by Hugging Face name.

Nothing is downloaded. A model is usable when its folder holds an ONNX export
(``onnx/model.onnx``, ``model.onnx`` or a quantised variant) and a ``tokenizer.json``, as the
Hugging Face exports of sentence-transformers models do. It is looked for at the path given,
then in the Hugging Face hub cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub``,
``~/.cache/huggingface/hub``) under ``models--ORG--NAME/snapshots/*``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contextlens.embeddings.minilm import MiniLMEmbedder

__all__ = ["BUNDLED_NAMES", "LocalModel", "find_local_model", "hub_cache_folders"]

#: Names under which the bundled model is the model asked for.
BUNDLED_NAMES = frozenset(
    {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "all-minilm-l6-v2"}
)
_ONNX_FILES = (
    "onnx/model.onnx",
    "model.onnx",
    "onnx/model_quantized.onnx",
    "model_quantized.onnx",
    "onnx/model_qint8_avx512_vnni.onnx",
)


@dataclass(frozen=True)
class LocalModel:
    """An ONNX sentence-embedding model on disk."""

    name: str
    folder: Path
    onnx: Path
    tokenizer: Path

    def embedder(self) -> MiniLMEmbedder:
        """The model on onnxruntime: mean-pooled, L2-normalised, like the bundled one."""
        return MiniLMEmbedder(
            self.onnx, tokenizer_path=self.tokenizer, name=f"local:{self.name}", verify=False
        )


def hub_cache_folders(extra: str | os.PathLike[str] | None = None) -> list[Path]:
    """The Hugging Face hub caches to look in, ``extra`` first."""
    found: list[Path] = []
    if extra:
        found.append(Path(extra).expanduser())
    if os.environ.get("HF_HUB_CACHE"):
        found.append(Path(os.environ["HF_HUB_CACHE"]).expanduser())
    if os.environ.get("HF_HOME"):
        found.append(Path(os.environ["HF_HOME"]).expanduser() / "hub")
    found.append(Path.home() / ".cache" / "huggingface" / "hub")
    return list(dict.fromkeys(found))


def _in_folder(name: str, folder: Path) -> LocalModel | None:
    tokenizer = folder / "tokenizer.json"
    if not tokenizer.is_file():
        return None
    for rel in _ONNX_FILES:
        if (folder / rel).is_file():
            return LocalModel(name, folder, folder / rel, tokenizer)
    return None


def find_local_model(
    name_or_path: str | os.PathLike[str], cache_folder: str | os.PathLike[str] | None = None
) -> LocalModel | None:
    """The model at ``name_or_path`` (a folder) or cached under that hub name, or None."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return _in_folder(path.name, path)
    name = str(name_or_path)
    if name.count("/") != 1:
        return None
    repo = "models--" + name.replace("/", "--")
    for cache in hub_cache_folders(cache_folder):
        snapshots = cache / repo / "snapshots"
        if not snapshots.is_dir():
            continue
        for snapshot in sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
            model = _in_folder(name, snapshot)
            if model is not None:
                return model
    return None
