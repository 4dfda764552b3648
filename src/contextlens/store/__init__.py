"""A local run history: every :class:`~contextlens.runner.EvalRun` in one SQLite file.

- :mod:`~contextlens.store.runs`: :class:`RunStore`, the file and its runs.
- :mod:`~contextlens.store.records`: what it gives back (:class:`RunInfo`, :class:`StoredRun`)
  and each run's status.
- :mod:`~contextlens.store.fingerprints`: fingerprints of the data a run read.
- :mod:`~contextlens.store.active`: the store of the process, when one is configured.
"""

from contextlens.store.active import active_store, configure, record_score
from contextlens.store.fingerprints import fingerprint_cases, fingerprint_file
from contextlens.store.records import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    RUNNING,
    RUNNING_OR_LOST,
    RunInfo,
    RunProcess,
    StoredRun,
    StoreError,
)
from contextlens.store.runs import SCHEMA_VERSION, RunStore, default_store_path, library_versions

__all__ = [
    "COMPLETED",
    "FAILED",
    "INTERRUPTED",
    "RUNNING",
    "RUNNING_OR_LOST",
    "SCHEMA_VERSION",
    "RunInfo",
    "RunProcess",
    "RunStore",
    "StoreError",
    "StoredRun",
    "active_store",
    "configure",
    "default_store_path",
    "fingerprint_cases",
    "fingerprint_file",
    "library_versions",
    "record_score",
]
