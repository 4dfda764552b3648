"""Whether two runs can be compared: where they differ besides their scores.

A comparison of two runs means what it seems to only when the runs differ in the one thing
being tried. :func:`differences` names everything else that differs: a metric's judge, its
pass mark, its settings, its prompts (or offline models), the data (the cases' fingerprint,
the data file's hash), the set of cases (and a run stopped before all of them), and the
contextlens version; in a milder note, the Python version and the runtime of the offline
models. Versions and data files are read from each run's
:class:`~contextlens.provenance.Provenance`, the same whether a run was read from its folder
or from the run store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from contextlens.provenance import Provenance
from contextlens.results import EvalRun, MetricSummary

__all__ = ["NOTED_VERSIONS", "Difference", "DifferenceKind", "Severity", "differences"]

DifferenceKind = Literal["judge", "settings", "prompts", "data", "cases", "version", "environment"]
Severity = Literal["warning", "note"]
"""``warning``: the difference may change the scores; ``note``: it rarely does."""

#: Versions whose difference is noted (kind ``environment``): Python, and the runtime and
#: tokenizer of the offline models, which can move their scores in the last digits.
NOTED_VERSIONS = ("python", "onnxruntime", "tokenizers")

#: Settings named in one difference at most; the rest are counted.
_SHOWN = 3


class Difference(BaseModel):
    """One way two runs are not alike: its ``kind``, the metric it concerns (None: the
    whole run), a sentence saying how, and its ``severity``."""

    kind: DifferenceKind
    metric: str | None = None
    message: str
    severity: Severity = "warning"


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
    found += _provenance_differences(a.provenance, b.provenance)
    return found


def _provenance_differences(a: Provenance | None, b: Provenance | None) -> list[Difference]:
    """The versions that made the runs: contextlens's (a warning), Python's and the offline
    models' runtime (a note); a run that records none is noted when the other does."""
    if a is None or b is None:
        if a is None and b is None:
            return []
        side = "A" if a is None else "B"
        return [
            Difference(
                kind="version",
                severity="note",
                message=f"run {side} does not record its provenance (the contextlens version, "
                "the data file), so they cannot be checked",
            )
        ]
    found = []
    if a.contextlens and b.contextlens and a.contextlens != b.contextlens:
        found.append(
            Difference(
                kind="version",
                message=f"contextlens {a.contextlens} made A, contextlens {b.contextlens} B",
            )
        )
    changed = [
        f"{_shown(name)} {va} in A, {vb} in B"
        for name in NOTED_VERSIONS
        for va, vb in [(a.version_of(name), b.version_of(name))]
        if va and vb and va != vb
    ]
    if changed:
        found.append(
            Difference(
                kind="environment",
                severity="note",
                message=f"{'; '.join(changed)} (offline scores may differ in the last digits)",
            )
        )
    return found


def _shown(name: str) -> str:
    return "Python" if name == "python" else name


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
    fa = a.provenance.data_file if a.provenance is not None else None
    fb = b.provenance.data_file if b.provenance is not None else None
    if fa is not None and fb is not None and fa.sha256 != fb.sha256:
        where = (
            f"{fa.path}, SHA-256 {fa.sha256[:12]} in A; {fb.path}, SHA-256 {fb.sha256[:12]} in B"
            if fa.path != fb.path
            else f"SHA-256 {fa.sha256[:12]} in A, {fb.sha256[:12]} in B"
        )
        found.append(Difference(kind="data", message=f"the data files differ ({where})"))
    ca, cb = a.data_fingerprint, b.data_fingerprint
    if ca and cb and ca != cb:
        found.append(
            Difference(
                kind="data",
                message=f"the cases' data differ (fingerprint {ca[:12]} in A, {cb[:12]} in B)",
            )
        )
    return found
