"""Writing output files: whole or not at all, never through a link planted in the folder,
secrets masked.

:func:`write_text` writes to a new temporary file beside the target (opened with
``O_EXCL | O_NOFOLLOW``) and renames it over the target, so a reader never sees half a report,
a full disk leaves the previous file as it was, and a symlink planted at the target's name is
replaced, never followed. :func:`create_new` opens a file that must not exist yet (a run's
``results.jsonl``) the same way. Every failure is an :class:`OutputError` naming the path and
the cause, never a bare ``OSError``.
"""

from __future__ import annotations

import errno
import io
import os
import secrets
from pathlib import Path
from typing import IO

from contextlens.errors import ContextLensError
from contextlens.redact import redact

__all__ = ["OutputError", "create_new", "describe_os_error", "make_folder", "write_text"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class OutputError(ContextLensError):
    """An output file or folder could not be written; ``path`` and ``cause`` say which and
    why (``No space left on device``, ``Read-only file system``...)."""

    def __init__(self, path: str | os.PathLike[str], cause: str) -> None:
        self.path = str(path)
        self.cause = cause
        super().__init__(f"cannot write {self.path}: {cause}")


def describe_os_error(exc: OSError) -> str:
    """What an ``OSError`` means for the user, in a few words."""
    if exc.errno == errno.ENOSPC:
        return "no space left on the device; free some and run the same command again"
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.ENAMETOOLONG:
        return "the file name is too long for this file system"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    if exc.errno == errno.EEXIST:
        return "it exists already"
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link, which is not followed"
    return exc.strerror or str(exc)


def _open_new(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)


def write_text(path: str | os.PathLike[str], text: str, *, mask: bool = True) -> Path:
    """Write ``text`` (its secrets masked unless ``mask`` is False) to ``path`` atomically:
    a temporary file beside it, then a rename over it. :class:`OutputError` on failure, the
    target left as it was."""
    target = Path(path)
    tmp = target.with_name(f".{target.name[:80]}.{secrets.token_hex(4)}.tmp")
    data = (redact(text) if mask else text).encode("utf-8", "surrogatepass")
    try:
        fd = _open_new(tmp)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(target, describe_os_error(exc)) from None
    return target


def make_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` made as a folder (with its parents) if it is not one; :class:`OutputError`
    naming it and the cause when it cannot be."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(folder, "it is a file, not a folder") from None
    except OSError as exc:
        raise OutputError(folder, describe_os_error(exc)) from None
    return folder


def create_new(path: str | os.PathLike[str]) -> IO[str]:
    """``path`` opened for writing text; it must not exist (not even as a link).
    :class:`OutputError` when it cannot be made."""
    target = Path(path)
    try:
        fd = _open_new(target)
    except OSError as exc:
        raise OutputError(target, describe_os_error(exc)) from None
    return io.TextIOWrapper(os.fdopen(fd, "wb"), encoding="utf-8", errors="surrogatepass")
