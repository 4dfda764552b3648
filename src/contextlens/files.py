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

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from contextlens.errors import ContextLensError
from contextlens.redact import redact

__all__ = [
    "LineFile",
    "OutputError",
    "describe_os_error",
    "make_folder",
    "write_parts",
    "write_text",
]

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
    if exc.errno == errno.EISDIR:
        return "a folder is there; remove it or give another name"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    if exc.errno == errno.EEXIST:
        return "it exists already"
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link, which is not followed"
    return exc.strerror or str(exc)


def _open_new(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)


def write_text(
    path: str | os.PathLike[str], text: str, *, mask: bool = True, stream: bool = False
) -> Path:
    """Write ``text`` (its secrets masked unless ``mask`` is False) to ``path`` atomically:
    a temporary file beside it, then a rename over it. :class:`OutputError` on failure, the
    target left as it was. ``stream``: see :func:`write_parts`."""
    return write_parts(path, [redact(text) if mask else text], stream=stream)


def write_parts(
    path: str | os.PathLike[str], parts: Iterable[str], *, stream: bool = False
) -> Path:
    """Write the texts ``parts`` one after the other to ``path`` atomically, as
    :func:`write_text` does, holding one of them at a time. :class:`OutputError` when the
    file cannot be written or a part cannot be read (an ``OSError`` of ``parts``); the
    target is then left as it was.

    ``stream`` (a path the user named, such as ``--junit /dev/stdout``): a ``path`` that is a
    character device or a named pipe (or a link to one) is written into as it is, never
    replaced; a pipe nobody reads is an :class:`OutputError`, not a wait."""
    target = Path(path)
    if stream and _is_stream(target):
        return _write_stream(target, parts)
    tmp = target.with_name(f".{target.name[:80]}.{secrets.token_hex(4)}.tmp")
    try:
        fd = _open_new(tmp)
        try:
            with os.fdopen(fd, "wb") as handle:
                for part in parts:
                    handle.write(part.encode("utf-8", "surrogatepass"))
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


def _is_stream(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _write_stream(target: Path, parts: Iterable[str]) -> Path:
    """``parts`` written into the device or pipe ``target``."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)  # a pipe with no reader: ENXIO
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as handle:
            for part in parts:
                handle.write(part.encode("utf-8", "surrogatepass"))
    except OSError as exc:
        cause = "a pipe that nobody reads" if exc.errno == errno.ENXIO else describe_os_error(exc)
        raise OutputError(target, cause) from None
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


_write = os.write


class LineFile:
    """A new file (it must not exist, not even as a link) written one whole line at a time:
    each line reaches the file in one unbuffered write, and a write that fails (a full disk)
    is cut back to the last whole line, so a reader never meets half of one.
    :class:`OutputError` when the file cannot be made or a line cannot be written."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self._fd: int | None = _open_new(self.path)
        except OSError as exc:
            raise OutputError(self.path, describe_os_error(exc)) from None
        self._size = 0

    def write(self, line: str) -> None:
        """Append ``line`` (its newline included), whole or not at all."""
        if self._fd is None:
            raise OutputError(self.path, "it is closed")
        data = memoryview(line.encode("utf-8", "surrogatepass"))
        done = 0
        try:
            while done < len(data):  # a disk that fills up writes part of a line, then fails
                done += _write(self._fd, data[done:])
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            raise OutputError(self.path, describe_os_error(exc)) from None
        self._size += len(data)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
