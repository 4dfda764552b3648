"""A run named on the command line: its folder, or its id in the run store."""

from __future__ import annotations

import os
from pathlib import Path

from contextlens.errors import InputError
from contextlens.results import RESULTS_FILE, SUMMARY_FILE, EvalRun
from contextlens.runner.folder import latest_run
from contextlens.store.active import active_store
from contextlens.store.runs import RunStore

__all__ = ["open_run"]


def open_run(ref: str | os.PathLike[str], store: RunStore | None = None) -> EvalRun:
    """The run ``ref`` names: a run folder (``OUT/<run id>``, ``OUT/latest``), a folder of
    runs (its newest completed run, as ``OUT/latest`` names it), or a run id or unique
    prefix in ``store`` (default: the active store, else the default store file). The folder
    of a run that did not complete is read as its id is, from the store. A folder is read as
    one from elsewhere (:mod:`contextlens.runfiles`): a ``summary.json`` that is not a
    regular file, or holds no run, is an :class:`InputError` naming it."""
    path = Path(ref)
    if path.is_dir():
        if _present(path / SUMMARY_FILE):
            return EvalRun.from_folder(path)
        newest = latest_run(path)
        if newest is not None and _present(newest / SUMMARY_FILE):
            return EvalRun.from_folder(newest)
        if (path / RESULTS_FILE).exists():  # a run that did not complete: as its id gives it
            try:
                return (store or active_store() or RunStore()).load(path.name)
            except InputError:
                raise InputError(
                    "this run has not completed (it has no summary.json) and the run store "
                    "does not hold it",
                    file=str(path),
                ) from None
        raise InputError("neither a run folder nor a folder of runs", file=str(path))
    return (store or active_store() or RunStore()).load(str(ref))


def _present(path: Path) -> bool:
    """Whether there is anything at ``path`` (a link to nothing, a FIFO: to be refused by
    name when read, not taken for no file)."""
    return path.exists() or path.is_symlink()
