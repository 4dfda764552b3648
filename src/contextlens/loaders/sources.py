"""Where a file of cases comes from: a regular file, standard input or a pipe, in the
format its suffix (or ``--format``) names."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from contextlens.errors import InputError

__all__ = ["FORMATS", "readable"]

#: The formats a file of cases may be in, by suffix.
FORMATS = {"jsonl": ".jsonl", "json": ".jsonl", "csv": ".csv", "parquet": ".parquet"}


@contextlib.contextmanager
def readable(source: str | Path, fmt: str | None = None) -> Iterator[Path]:
    """A path that can be read as many times as a run reads its file: ``source`` itself when
    it is a regular file, else (``-`` for standard input, a named pipe, ``<(command)``) a
    temporary copy of what it streams, removed afterwards. ``fmt`` (jsonl, csv, parquet)
    names the format where there is no suffix to tell it (default: JSONL)."""
    path = Path(source)
    if fmt is not None and fmt.lower() not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use jsonl, csv or parquet", file=str(source))
    is_stdin = str(source) == "-"
    if not is_stdin and (not path.exists() or path.is_file()):
        if fmt is not None and FORMATS[fmt.lower()] != _suffix_of(path):
            raise InputError(f"the file's suffix says {path.suffix!r}, not {fmt}", file=str(path))
        yield path
        return
    if not is_stdin and path.is_dir():
        raise InputError("is a folder, not a file of cases", file=str(path))
    suffix = FORMATS[(fmt or "jsonl").lower()]
    with tempfile.TemporaryDirectory(prefix="contextlens-input-") as folder:
        copy = Path(folder) / f"stdin{suffix}" if is_stdin else Path(folder) / f"input{suffix}"
        try:
            stream = sys.stdin.buffer if is_stdin else open(path, "rb")  # noqa: SIM115
            with copy.open("wb") as out:
                shutil.copyfileobj(stream, out)
            if not is_stdin:
                stream.close()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", file=str(source)) from None
        yield copy


def _suffix_of(path: Path) -> str:
    suffix = path.suffix.lower()
    return (
        ".parquet"
        if suffix == ".pq"
        else ".csv"
        if suffix == ".csv"
        else (".parquet" if suffix == ".parquet" else ".jsonl")
    )
