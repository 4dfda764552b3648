"""Whether two runs can be compared: where they differ besides their scores.

A comparison of two runs means what it seems to only when the runs differ in the one thing
being tried. :func:`differences` names everything else that differs: a metric's judge, its
pass mark, its settings, its prompts (or offline models), the data (the cases' fingerprint,
the data file's hash), the set of cases (and a run stopped before all of them), and the
contextlens version.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from contextlens.results import EvalRun, MetricSummary

__all__ = ["Difference", "DifferenceKind", "differences"]

DifferenceKind = Literal["judge", "settings", "prompts", "data", "cases", "version"]

#: Settings named in one difference at most; the rest are counted.
_SHOWN = 3


class Difference(BaseModel):
    """One way two runs are not alike: its ``kind``, the metric it concerns (None: the
    whole run), and a sentence saying how."""

    kind: DifferenceKind
    metric: str | None = None
    message: str


def differences(a: EvalRun, b: EvalRun, *, only_a: int = 0, only_b: int = 0) -> list[Difference]:
    """How run ``b`` differs from run ``a`` besides its scores; ``only_a`` / ``only_b``: the
    cases that are in one run only."""
    found: list[Difference] = []
    for key in [k for k in a.summaries if k in b.summaries]:
        found += _metric_differences(key, a.summaries[key], b.summaries[key])
    found += _data_differences(a, b)
    for side, run in (("A", a), ("B", b)):
        if run.stopped:
            found.append(
                Difference(
                    kind="cases",
                    message=f"run {side} stopped before all its cases ({run.stopped}); "
                    "the items it did not run are left out",
                )
            )
    if only_a or only_b:
        found.append(
            Difference(
                kind="cases",
                message=f"the case sets differ: {only_a} case(s) only in A, {only_b} only in B",
            )
        )
    va, vb = _version(a), _version(b)
    if va and vb and va != vb:
        found.append(
            Difference(kind="version", message=f"contextlens {va} made A, contextlens {vb} B")
        )
    return found


def _metric_differences(key: str, a: MetricSummary, b: MetricSummary) -> list[Difference]:
    found = []
    if (a.judge or None) != (b.judge or None):
        found.append(
            Difference(
                kind="judge",
                metric=key,
                message=f"{key}: judged by {a.judge or 'no judge'} in A, "
                f"by {b.judge or 'no judge'} in B",
            )
        )
    marks = (a.threshold, b.threshold)
    marks_differ = None not in marks and a.threshold != b.threshold
    if marks_differ:
        found.append(
            Difference(
                kind="settings",
                metric=key,
                message=f"{key}: the pass mark is {a.threshold:g} in A, {b.threshold:g} in B "
                "(the pass rates are of different bars)",
            )
        )
    if a.settings is None or b.settings is None:
        if a.settings is not None or b.settings is not None:
            side = "A" if a.settings is None else "B"
            found.append(
                Difference(
                    kind="settings",
                    metric=key,
                    message=f"{key}: run {side} does not record the metric's settings, "
                    "so they cannot be checked",
                )
            )
        return found
    changed = sorted(
        k
        for k in set(a.settings.values) | set(b.settings.values)
        if a.settings.values.get(k) != b.settings.values.get(k)
        and not (k == "threshold" and marks_differ)  # said as the pass mark
    )
    if changed:
        shown = "; ".join(f"{k} {_value(a, k)} in A, {_value(b, k)} in B" for k in changed[:_SHOWN])
        more = f"; and {len(changed) - _SHOWN} more" if len(changed) > _SHOWN else ""
        found.append(
            Difference(
                kind="settings", metric=key, message=f"{key}: settings differ: {shown}{more}"
            )
        )
    if a.settings.prompts != b.settings.prompts:
        found.append(
            Difference(
                kind="prompts",
                metric=key,
                message=f"{key}: its prompts or offline models differ "
                f"({a.settings.prompts or 'none'} in A, {b.settings.prompts or 'none'} in B)",
            )
        )
    return found


def _value(summary: MetricSummary, key: str) -> str:
    assert summary.settings is not None
    value = summary.settings.values.get(key, "unset")
    return f"{value!r:.60}" if not isinstance(value, str) else f"{value:.60}"


def _data_differences(a: EvalRun, b: EvalRun) -> list[Difference]:
    found = []
    fa, fb = _file_hash(a), _file_hash(b)
    if fa and fb and fa != fb:
        found.append(
            Difference(
                kind="data",
                message=f"the data files differ (SHA-256 {fa[:12]} in A, {fb[:12]} in B)",
            )
        )
    ca, cb = a.data_fingerprint, b.data_fingerprint
    if ca and cb and ca != cb:
        found.append(
            Difference(
                kind="data",
                message=f"the cases' data differ (fingerprint {ca[:12]} in A, {cb[:12]} in B)",
            )
        )
    return found


def _file_hash(run: Any) -> str | None:
    value = getattr(run, "dataset_fingerprint", None)
    return value if isinstance(value, str) else None


def _version(run: Any) -> str | None:
    versions = getattr(run, "versions", None)
    return versions.get("contextlens") if isinstance(versions, dict) else None
