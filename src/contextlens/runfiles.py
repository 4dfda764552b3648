"""A run folder's files read as files from elsewhere: a folder named on the command line,
or by a run store, may have been copied, unpacked or made by anyone.

- A run id (a ``summary.json``'s, the store's, the one ``OUT/latest`` names) matches
  :data:`RUN_ID`: 1 to 64 letters, digits, ``.``, ``_`` and ``-``, not starting with ``.``;
  anything else is an :class:`~contextlens.errors.InputError` naming the file it was read
  from. So a page or folder named after a run id stays in its folder.
- Only regular files are read (a symbolic link to one is followed): a FIFO, a device
  (``/dev/zero``), a socket or a folder in a file's place is refused, naming the file,
  without waiting on it.
- Sizes are bounded: :data:`MAX_SUMMARY_BYTES` for ``summary.json``,
  :data:`MAX_FILE_BYTES` for ``results.jsonl`` and ``cases.jsonl``, which are streamed line
  by line, each line at most :data:`MAX_LINE_BYTES`; a file is read as far as it was long
  when it was opened.
- Every error names the file and the line (and the field, for a line that is not what it
  should be).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from pydantic import ValidationError

from contextlens.errors import InputError
from contextlens.files import OutputError, describe_os_error
from contextlens.retriever import input_error

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_SUMMARY_BYTES",
    "RUN_ID",
    "check_run_id",
    "confined",
    "is_run_id",
    "open_regular",
    "plain_name",
    "read_records",
    "read_small",
    "whole_lines",
]

T = TypeVar("T")

RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
"""What a run id is: 1 to 64 of ``A-Z a-z 0-9 . _ -``, the first not a ``.``."""

MAX_SUMMARY_BYTES = 64 * 2**20
"""The largest ``summary.json`` read (64 MiB; a run's is a few kilobytes)."""
MAX_FILE_BYTES = 64 * 2**30
"""The largest ``results.jsonl`` or ``cases.jsonl`` read (64 GiB)."""
MAX_LINE_BYTES = 256 * 2**20
"""The longest line of ``results.jsonl`` or ``cases.jsonl`` read (256 MiB)."""

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def is_run_id(value: object) -> bool:
    """Whether ``value`` is a run id (:data:`RUN_ID`)."""
    return isinstance(value, str) and RUN_ID.fullmatch(value) is not None


def check_run_id(value: object, *, file: str | os.PathLike[str] | None = None) -> str:
    """``value`` when it is a run id; else an :class:`InputError` naming ``file``, where it
    was read."""
    if is_run_id(value):
        return value  # type: ignore[return-value]
    raise InputError(
        f"{value!r:.80} is not a run id (1 to 64 letters, digits, '.', '_' or '-', not "
        "starting with '.')",
        file=None if file is None else str(file),
    )


def plain_name(name: str) -> bool:
    """Whether ``name`` names a file in the folder it is joined to: not empty, no separator,
    no NUL, not hidden (so neither ``.`` nor ``..``)."""
    return bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")


def confined(folder: str | os.PathLike[str], name: str) -> Path:
    """``folder / name`` when ``name`` is a plain file name (:func:`plain_name`) that stays
    in ``folder`` once resolved; else an :class:`OutputError` naming it, nothing written."""
    base = Path(folder)
    target = base / name
    inside = plain_name(name)
    if inside:
        try:
            resolved = base.resolve()
        except (OSError, RuntimeError):
            inside = False
        else:
            inside = Path(os.path.normpath(resolved / name)).parent == resolved
    if not inside:
        raise OutputError(
            target, f"{name!r:.120} is not a plain file name in {base}; nothing is written"
        )
    return target


def _kind(mode: int) -> str | None:
    """What a file that is not a regular file is (None for a regular one)."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str], limit: int) -> tuple[BinaryIO, int]:
    """``path`` opened for reading, with its size, when it is a regular file (or a symbolic
    link to one) of at most ``limit`` bytes; an :class:`InputError` naming it otherwise.
    ``FileNotFoundError`` when there is nothing at ``path``. Never waits on a FIFO."""
    name = str(path)
    try:
        mode = os.stat(path).st_mode  # through a symbolic link, to what it names
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError("a symbolic link to nothing", file=name) from None
        raise
    except OSError as exc:
        raise InputError(f"cannot read: {describe_os_error(exc)}", file=name) from None
    kind = _kind(mode)
    if kind is not None:
        raise InputError(f"{kind}, not a regular file: not read", file=name)
    try:  # O_NONBLOCK: a FIFO put in its place since is opened without waiting
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(exc.errno, exc.strerror, name) from None
        raise InputError(f"cannot read: {describe_os_error(exc)}", file=name) from None
    try:
        info = os.fstat(fd)
        kind = _kind(info.st_mode)
        if kind is not None:
            raise InputError(f"{kind}, not a regular file: not read", file=name)
        if info.st_size > limit:
            raise InputError(
                f"{info.st_size:,} bytes, more than the {_size(limit)} a run's file may be: "
                "not read",
                file=name,
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return handle, info.st_size


def _size(limit: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit:,} bytes"


def read_small(path: str | os.PathLike[str], limit: int = MAX_SUMMARY_BYTES) -> str:
    """The whole text of the regular file ``path`` of at most ``limit`` bytes, as UTF-8;
    an :class:`InputError` naming it when it cannot be read."""
    handle, size = open_regular(path, limit)
    with handle:
        try:
            data = handle.read(size + 1)
        except OSError as exc:
            raise InputError(f"cannot read: {describe_os_error(exc)}", file=str(path)) from None
    if len(data) > size:  # it grew while read: what it was when opened
        data = data[:size]
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"not UTF-8: byte 0x{data[exc.start]:02x}", file=str(path), line=line
        ) from None


def whole_lines(
    path: str | os.PathLike[str],
    *,
    limit: int = MAX_FILE_BYTES,
    line_limit: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each whole, non-blank line of ``path`` (a writer that
    was killed may have cut the last one), streamed; nothing when there is no file. The
    file must be regular and at most ``limit`` bytes, each line at most ``line_limit``; it
    is read as far as it was long when opened. Errors name the file and the line."""
    name = str(path)
    try:
        handle, size = open_regular(path, limit)
    except FileNotFoundError:
        return
    left = size
    with handle:
        number = 0
        while left > 0:
            number += 1
            try:
                data = handle.readline(min(left, line_limit + 1))
            except OSError as exc:
                raise InputError(
                    f"cannot read: {describe_os_error(exc)}", file=name, line=number
                ) from None
            if not data:
                return
            left -= len(data)
            if not data.endswith(b"\n"):
                if len(data) > line_limit:
                    raise InputError(
                        f"the line is longer than {_size(line_limit)}: not read",
                        file=name,
                        line=number,
                    )
                return  # the last line, cut
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"not UTF-8: byte 0x{data[exc.start]:02x} at position {exc.start + 1}",
                    file=name,
                    line=number,
                ) from None
            if text.strip():
                yield number, text


def read_records(
    path: str | os.PathLike[str], parse: Callable[[str], T], *, what: str = "record"
) -> Iterator[T]:
    """Each whole line of ``path`` read by ``parse`` (a pydantic ``model_validate_json``);
    a line it refuses is an :class:`InputError` naming the file, the line and the field."""
    name = str(path)
    for number, text in whole_lines(path):
        try:
            yield parse(text)
        except ValidationError as exc:
            found = input_error(exc, file=name, line=number)
            raise InputError(
                f"not a {what}: {found.message}", file=name, line=number, field=found.field
            ) from None
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not a {what}: {exc}", file=name, line=number) from None
