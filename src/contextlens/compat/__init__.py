"""The seed libraries' call surfaces, as thin shells over the metrics.

Each shell keeps its library's names, arguments and result shapes (a user changes only the
import) and runs through the same engine path as :func:`contextlens.evaluate`: cache, shared
limiter, retries, accounting. A shell holds its configuration and, where its library sets
results on the metric object, the last result.

- :mod:`~contextlens.compat.gaussia`: ``Context.run`` -> ``list[ContextMetric]``
- :mod:`~contextlens.compat.deepeval`: ``ContextualRelevancyMetric.measure(test_case)``
- :mod:`~contextlens.compat.opik`: ``ContextPrecision.score(...)`` -> ``ScoreResult``
- :mod:`~contextlens.compat.novastack`: ``ContextSimilarityEvaluator.evaluate(...)``
"""
