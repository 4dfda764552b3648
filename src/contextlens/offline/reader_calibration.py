"""From the claim reader's verdicts on a reply's claims to a calibrated probability.

A reply's features (:func:`reply_features`) are the log-odds of its claims' mean and
lowest probability of "supported" and of their highest probability of "contradicted",
with, as the bundled calibration chooses, reply features of the word and embedding
extractor (:data:`contextlens.offline.features.CANDIDATES`: the claims' cosine with their
closest evidence sentences, the numbers found nowhere in the evidence, ...). The bundled
logistic model ``offline/weights/support_reader.json`` names the features it takes and maps
them to the probability that people judge the reply supported. It is chosen and fitted by
``benchmarks/fit_reader_calibration.py`` on the held-out verdicts of the public labelled
sources (each read by a reader trained without it), every source weighted alike; its card
(``meta.held_out``) holds each source's figures with the calibration fitted without it
too.
"""

from __future__ import annotations

import numpy as np

from contextlens.offline.features import CANDIDATES, aggregate_many
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.support import ItemFeatures

#: The reader's own features of a reply.
READER_FEATURES = ("logit_mean_supported", "logit_min_supported", "logit_max_contradicted")
#: Every feature a calibration may take.
KNOWN = (*READER_FEATURES, *CANDIDATES)
MODEL_NAME = "support_reader"
_EPS = 1e-4


def _logit(p: float) -> float:
    q = min(max(float(p), _EPS), 1 - _EPS)
    return float(np.log(q / (1 - q)))


def reply_features(probabilities: np.ndarray, extracted: np.ndarray) -> dict[str, float]:
    """Every :data:`KNOWN` feature of one reply, from its claims' ``(n, 3)`` verdict rows
    and its extracted reply features (:data:`~contextlens.offline.features.CANDIDATES`)."""
    rows = np.asarray(probabilities, dtype=np.float64)
    out = {
        "logit_mean_supported": _logit(rows[:, 0].mean()),
        "logit_min_supported": _logit(rows[:, 0].min()),
        "logit_max_contradicted": _logit(rows[:, 1].max()),
    }
    out.update({name: float(v) for name, v in zip(CANDIDATES, extracted, strict=True)})
    return out


def calibration() -> LogisticModel:
    """The bundled calibration (ValueError when it names a feature not in :data:`KNOWN`)."""
    model = load_model(MODEL_NAME)
    unknown = [n for n in model.features if n not in KNOWN]
    if unknown:
        raise ValueError(f"offline model {MODEL_NAME!r} takes unknown features {unknown}")
    return model


def calibrated(probabilities: np.ndarray, f: ItemFeatures) -> tuple[float, np.ndarray]:
    """The probability that a reply with these claim verdicts and features is supported,
    and each claim's, read as a reply of that claim alone (so a one-claim reply's claim
    and reply agree). ``f`` is an item :func:`~contextlens.offline.support.unscored` leaves
    to be scored."""
    assert f.rows is not None and f.reply is not None
    model = calibration()
    rows = np.asarray(probabilities, dtype=np.float64)
    alone = aggregate_many(f.rows, np.arange(len(f.rows)))
    found = [reply_features(rows, f.reply)]
    found += [reply_features(rows[j : j + 1], alone[j]) for j in range(len(rows))]
    p = model.predict(np.array([[x[n] for n in model.features] for x in found]))
    return float(p[0]), p[1:]
