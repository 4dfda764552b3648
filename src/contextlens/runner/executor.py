"""Executors: where else a run may be scored (a cluster), with the results of a local run."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from contextlens.results import EvalRun
from contextlens.runner.config import RunConfig

__all__ = ["EXECUTORS", "Executor", "resolve_executor"]


@runtime_checkable
class Executor(Protocol):
    """Runs an evaluation somewhere else and returns the :class:`EvalRun` a local run of the
    same cases would: ``run(cases, metrics, config)``."""

    def run(self, cases: Iterable[Any], metrics: Sequence[Any], config: RunConfig) -> EvalRun: ...


#: Executors :func:`~contextlens.runner.evaluate` knows by name: ``module:class``, imported
#: when first asked for, so the core never imports what an executor needs.
EXECUTORS = {"ray": ("contextlens.scale.ray:RayExecutor", "ray")}


def resolve_executor(executor: str | Executor) -> Executor:
    """The executor ``executor`` names (``"ray"``), or ``executor`` itself."""
    if isinstance(executor, str):
        if executor not in EXECUTORS:
            raise ValueError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
        target, extra = EXECUTORS[executor]
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] == extra:
                raise ImportError(
                    f"executor={executor!r} needs {extra}: pip install 'contextlens[{extra}]'"
                ) from None
            raise
        return getattr(module, attr)()
    if isinstance(executor, Executor):
        return executor
    raise TypeError(f"executor must be a name ({', '.join(EXECUTORS)}) or an Executor")
