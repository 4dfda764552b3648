"""Fingerprints of the data a run read, to tell two runs on the same data."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from contextlens.provenance import file_sha256

__all__ = ["fingerprint_cases", "fingerprint_file"]


def fingerprint_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of the file's bytes (read 1 MiB at a time)."""
    return file_sha256(path)


def fingerprint_cases(cases: Iterable[Any]) -> str:
    """SHA-256 hex digest of in-memory cases, in order (consumes an iterator).

    Each case (a pydantic model, a dict or any JSON value) is hashed as canonical JSON
    (sorted keys, compact), one line per case, so equal data gives an equal fingerprint in
    any process.
    """
    digest = hashlib.sha256()
    for case in cases:
        value = case.model_dump(mode="json") if isinstance(case, BaseModel) else case
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
        digest.update(text.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()
