"""Small learned scorers shipped as numbers: a logistic model over named features.

A model file (``offline/weights/<name>.json``) holds the feature names, the
standardisation (``mean``, ``scale``), the coefficients and intercept, and optionally a
monotone calibration map (``calibration``: increasing ``x`` probabilities and the ``y``
probabilities people agreed with, interpolated linearly). Inference is numpy only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LogisticModel:
    """``p = sigmoid(intercept + coef . (x - mean) / scale)``, then the calibration map."""

    name: str
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    calibration: tuple[np.ndarray, np.ndarray] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.features)
        for key in ("mean", "scale", "coef"):
            if np.shape(getattr(self, key)) != (n,):
                raise ValueError(
                    f"model {self.name!r}: {key!r} has shape {np.shape(getattr(self, key))}, "
                    f"expected ({n},) to match its {n} features"
                )
        if np.any(np.asarray(self.scale) <= 0):
            raise ValueError(f"model {self.name!r}: every 'scale' must be > 0")

    def taking(self, features: tuple[str, ...]) -> LogisticModel:
        """This model, which must take ``features`` in that order (ValueError otherwise)."""
        if self.features != tuple(features):
            raise ValueError(
                f"offline model {self.name!r} takes the features {self.features}, "
                f"expected {tuple(features)}"
            )
        return self

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Raw log-odds for a ``(n_items, n_features)`` matrix."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if x.shape[1] != len(self.features):
            raise ValueError(
                f"model {self.name!r} takes {len(self.features)} features "
                f"({', '.join(self.features)}), got {x.shape[1]}"
            )
        return self.intercept + ((x - self.mean) / self.scale) @ self.coef

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Calibrated probabilities in [0, 1], one per row of ``x``."""
        p = 1.0 / (1.0 + np.exp(-np.clip(self.logits(x), -40.0, 40.0)))
        if self.calibration is not None:
            xs, ys = self.calibration
            p = np.interp(p, xs, ys)
        return p

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "features": list(self.features),
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
            "coef": [float(v) for v in self.coef],
            "intercept": float(self.intercept),
            "meta": self.meta,
        }
        if self.calibration is not None:
            out["calibration"] = {
                "x": [float(v) for v in self.calibration[0]],
                "y": [float(v) for v in self.calibration[1]],
            }
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> LogisticModel:
        try:
            calibration = data.get("calibration")
            cal = None
            if calibration is not None:
                xs = np.asarray(calibration["x"], dtype=np.float64)
                ys = np.asarray(calibration["y"], dtype=np.float64)
                if xs.shape != ys.shape or np.any(np.diff(xs) < 0):
                    raise ValueError("calibration 'x' must be increasing and as long as 'y'")
                cal = (xs, ys)
            return cls(
                name=str(data["name"]),
                features=tuple(str(f) for f in data["features"]),
                mean=np.asarray(data["mean"], dtype=np.float64),
                scale=np.asarray(data["scale"], dtype=np.float64),
                coef=np.asarray(data["coef"], dtype=np.float64),
                intercept=float(data["intercept"]),
                calibration=cal,
                meta=dict(data.get("meta", {})),
            )
        except KeyError as exc:
            raise ValueError(f"{source}: model file lacks the field {exc.args[0]!r}") from exc
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from exc

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")


def held_out_figures(model: LogisticModel, what: str) -> str | None:
    """One sentence of what the model's card (``meta.held_out``: per source ``auroc`` and
    ``ece``, each source scored by a fit without it) says of ``what``; None without one."""
    table = model.meta.get("held_out") or {}
    rows = [v for v in table.values() if isinstance(v, dict) and {"auroc", "ece"} <= set(v)]
    if not rows:
        return None
    aurocs = sorted(float(v["auroc"]) for v in rows)
    eces = sorted(float(v["ece"]) for v in rows)
    command = str(model.meta.get("command", "")).split(" ")[0]
    return (
        f"{what}, on {len(rows)} public sources each held out from its fit: AUROC "
        f"{aurocs[0]:.2f} to {aurocs[-1]:.2f}, expected calibration error median "
        f"{float(np.median(eces)):.3f}, worst {eces[-1]:.3f}"
        + (f" ({command})." if command else ".")
    )


@cache
def load_model(name: str) -> LogisticModel:
    """The bundled model ``offline/weights/<name>.json``."""
    ref = resources.files("contextlens.offline") / "weights" / f"{name}.json"
    try:
        text = ref.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"no bundled offline model named {name!r}") from None
    return LogisticModel.from_dict(json.loads(text), source=str(ref))
