"""Counting the tokens of a judge call before it is sent.

:func:`counter_for` gives the provider's tokenizer where one is installed and its files are
on this machine (tiktoken for OpenAI's models: its own cache, or the copy LiteLLM bundles),
else characters / 4. Nothing is ever downloaded. :data:`BYTES` is an upper bound for any
byte-level tokenizer (no token is shorter than a byte), used where a bound must hold: the
cost cap.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from contextlens.backend import Message

__all__ = ["BYTES", "CHARS", "TokenCounter", "counter_for", "message_text"]


@dataclass(frozen=True)
class TokenCounter:
    """Counts the tokens of a text. ``name`` says how (``tiktoken o200k_base``,
    ``characters / 4``); ``per_message`` and ``per_call`` are the chat format's own tokens
    (role markers, the reply's priming) added to a prompt of messages."""

    name: str
    count: Callable[[str], int]
    per_message: int = 0
    per_call: int = 0

    def prompt(self, messages: Sequence[Message], extra: str = "") -> int:
        """The prompt tokens of ``messages`` (and ``extra``: a response-format schema the
        provider counts as prompt)."""
        texts = [message_text(m) for m in messages]
        body = sum(self.count(t) for t in texts) + (self.count(extra) if extra else 0)
        return body + self.per_message * len(texts) + self.per_call


def message_text(message: Message) -> str:
    """The text of a message's content (a string, or a list of content parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _chars(text: str) -> int:
    return math.ceil(len(text) / 4)


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


CHARS = TokenCounter("characters / 4", _chars)
#: At least as many tokens as any byte-level tokenizer counts, chat format included.
BYTES = TokenCounter("UTF-8 bytes (an upper bound)", _bytes, per_message=8, per_call=16)

_ENCODINGS = "https://openaipublic.blob.core.windows.net/encodings/"
#: The SHA-256 of the encodings' files: a file that does not match is not used (tiktoken
#: would delete it and download another).
_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_ENV_LOCK = threading.Lock()


def _tiktoken_dirs() -> list[Path]:
    """Where tiktoken's files may already be: its cache folders, then LiteLLM's copy."""
    dirs = [
        Path(p)
        for p in (os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("DATA_GYM_CACHE_DIR"))
        if p
    ]
    dirs.append(Path(tempfile.gettempdir()) / "data-gym-cache")
    spec = importlib.util.find_spec("litellm")  # its location only: importing it is slow
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            dirs.append(Path(root) / "litellm_core_utils" / "tokenizers")
    return dirs


def _intact(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _local_encoding(name: str) -> object | None:
    """The tiktoken encoding ``name``, from a file already on this machine, or None."""
    try:
        from tiktoken import Encoding
        from tiktoken_ext import openai_public
    except ImportError:
        return None
    make = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if make is None or name not in _SHA256:
        return None
    key = hashlib.sha1(f"{_ENCODINGS}{name}.tiktoken".encode()).hexdigest()
    for folder in _tiktoken_dirs():
        if _intact(folder / key, _SHA256[name]):
            with _ENV_LOCK:  # tiktoken reads its cache folder from the environment
                before = os.environ.get("TIKTOKEN_CACHE_DIR")
                os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
                try:
                    return Encoding(**make())
                except Exception:  # characters / 4 rather than a failed estimate
                    return None
                finally:
                    if before is None:
                        os.environ.pop("TIKTOKEN_CACHE_DIR", None)
                    else:
                        os.environ["TIKTOKEN_CACHE_DIR"] = before
    return None


@lru_cache(maxsize=64)
def counter_for(model: str | None) -> TokenCounter:
    """The token counter for ``model``: tiktoken's encoding of an OpenAI model when tiktoken
    and its file are on this machine (``openai/gpt-4o-mini`` and dated names included), else
    :data:`CHARS`."""
    if not model:
        return CHARS
    try:
        from tiktoken.model import encoding_name_for_model
    except ImportError:
        return CHARS
    name = model.strip().lower()
    while True:
        try:
            encoding_name = encoding_name_for_model(name)
            break
        except KeyError:
            if "/" not in name:
                return CHARS
            name = name.split("/", 1)[1]
    encoding = _local_encoding(encoding_name)
    if encoding is None:
        return CHARS

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))  # type: ignore[attr-defined]

    # OpenAI's chat format: three tokens per message, three priming the reply.
    return TokenCounter(f"tiktoken {encoding_name}", count, per_message=3, per_call=3)
