"""The bundled triage bands: for each offline support model, the band of probabilities a
triage run sends to the judge (``offline/weights/triage.json``, chosen and measured by
``benchmarks/triage.py`` on the public labelled sources; its ``meta`` holds the held-out
table)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from contextlens.schemas import TriageBand

__all__ = ["TRIAGE_FILE", "bundled_band", "bundled_bands"]

#: The file of the bundled bands, under ``contextlens/offline/``.
TRIAGE_FILE = "weights/triage.json"


@cache
def _read() -> dict[str, Any]:
    text = resources.files("contextlens.offline").joinpath(TRIAGE_FILE).read_text("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("bands"), dict):
        raise ValueError(f"contextlens/offline/{TRIAGE_FILE}: expected an object with 'bands'")
    return data


def bundled_bands() -> dict[str, TriageBand]:
    """Every bundled band, by support model."""
    return {name: TriageBand.model_validate(b) for name, b in _read()["bands"].items()}


def bundled_band(support_model: str) -> TriageBand | None:
    """The bundled band of ``support_model``, None when none was measured for it."""
    return bundled_bands().get(support_model)
