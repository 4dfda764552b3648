"""The options of ``contextlens run``, gathered as they were given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunArgs"]


@dataclass(frozen=True)
class RunArgs:
    """Every option of ``contextlens run``, one field each, named and typed as the command
    declares it; nothing is checked yet (:func:`~contextlens.cli.run.plan.planned` does)."""

    data: Path
    metric: list[str]
    judge: str | None
    judge_timeout: float | None
    max_tokens: int | None
    structured_output: str | None
    embedder: str | None
    concurrency: int | None
    repeats: int
    out_dir: Path
    fail_under: list[str]
    fail_mode: str
    threshold: list[str]
    store: Path | None
    no_store: bool
    cache: str | None
    max_failures: str
    quiet: bool
    input_format: str | None
    ray: str | None
    dry_run: bool
    max_cost: float | None
    triage: bool
    batch: bool
    triage_band: list[str]
    name: str | None
    tag: list[str]
    junit: Path | None
    junit_items: bool
    markdown: Path | None
    csv: Path | None
