"""Statistics, pure numpy: interaction weights, the frequentist and Bayesian modes (with
gaussia's StatisticalMode primitives), the Bayesian bootstrap of a weighted mean.

- :mod:`~contextlens.stats.weights`: ``resolve_weights``, ``weighted_mean``
- :mod:`~contextlens.stats.bootstrap`: ``bayesian_bootstrap_means``, ``equal_tailed``,
  ``repeated_interval``
- :mod:`~contextlens.stats.modes`: ``FrequentistMode``, ``BayesianMode``, ``Estimate``
- :mod:`~contextlens.stats.primitives`: divergence, rate, aggregation, dispersion
"""

from contextlens.stats.bootstrap import (
    NORMAL_LIMIT_MIN,
    bayesian_bootstrap_means,
    equal_tailed,
    repeated_interval,
)
from contextlens.stats.modes import (
    BayesianMode,
    Estimate,
    FrequentistMode,
    StatisticalMode,
    checked_mode,
)
from contextlens.stats.weights import WeightWarning, resolve_weights, weighted_mean

__all__ = [
    "NORMAL_LIMIT_MIN",
    "BayesianMode",
    "Estimate",
    "FrequentistMode",
    "StatisticalMode",
    "WeightWarning",
    "bayesian_bootstrap_means",
    "checked_mode",
    "equal_tailed",
    "repeated_interval",
    "resolve_weights",
    "weighted_mean",
]
