"""A run's entry in the run store: recorded as running when it starts, as failed or
interrupted when it raises; a store that cannot take it is warned about, never fatal."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from contextlens.cli.application import RED, err, stop_signal
from contextlens.terminal import line

if TYPE_CHECKING:
    from contextlens.results import RecordedConfig
    from contextlens.runner import RunConfig, RunFolder
    from contextlens.store import RunStore

__all__ = ["command_line", "recorded", "side_file_warning", "start_recording"]


def command_line() -> str:
    """This process's command line, quoted for a shell, to be run again as it is."""
    head = [sys.argv[0]]
    if Path(sys.argv[0]).name == "__main__.py":  # python -m contextlens
        head = [sys.executable, "-m", "contextlens"]
    return shlex.join([*head, *sys.argv[1:]])


def start_recording(
    folder: RunFolder,
    config: RunConfig,
    described: RecordedConfig,
    *,
    data: Path,
    fingerprint: str | None,
) -> RunStore | None:
    """The run store, with the run recorded as running (None when the run is not stored)."""
    if config.store is False:
        return None
    from contextlens.store import RunStore, StoreError

    try:
        runs_store = RunStore(None if config.store is True else config.store)  # the default
        runs_store.start(
            folder.run_id,
            judge=described.judge or "",
            repeats=config.repeats,
            out_dir=folder.path,
            config=described,
            dataset=data,
            dataset_fingerprint=fingerprint,
            command=config.command,
        )
    except StoreError as exc:  # the history is a side file: the run goes on, unrecorded
        side_file_warning(f"this run is not recorded in the run store: {exc}")
        return None
    return runs_store


def side_file_warning(message: str) -> None:
    """A warning about a file beside the run (the store, ``latest``): the run goes on."""
    err.print(line(Text("warning: ", style=RED), message))


@contextmanager
def recorded(runs_store: RunStore | None, run_id: str) -> Iterator[None]:
    """Records the run as failed, with the error, when the block raises (interrupted on
    Ctrl-C); the block records it as completed."""
    try:
        yield
    except KeyboardInterrupt:
        _record_end(runs_store, run_id, f"stopped by {stop_signal()}", interrupted=True)
        raise
    except BaseException as exc:
        _record_end(runs_store, run_id, f"{type(exc).__name__}: {exc}", interrupted=False)
        raise


def _record_end(runs_store: RunStore | None, run_id: str, error: str, *, interrupted: bool) -> None:
    """Record how the run ended, when there is a store; a store that cannot take it (locked
    by another process) is warned about: it never hides why the run ended."""
    if runs_store is None:
        return
    from contextlens.store import StoreError

    try:
        runs_store.fail(run_id, error, interrupted=interrupted)
    except StoreError as exc:
        side_file_warning(f"the run store could not record how the run ended: {exc}")
