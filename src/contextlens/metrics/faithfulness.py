"""Faithfulness: is each claim of the answer supported by the retrieved chunks?

``score = supported claims / claims of actual_output``, judged against ``retrieval_context``
(:mod:`contextlens.metrics.claims`: one judge call per case, or offline the support model of
the ``Context`` metric, per claim). The reason names the unsupported claims, each with the
chunk closest to it. Ragas's ``Faithfulness`` and DeepEval's ``FaithfulnessMetric`` measure
the same share; here the claims and their verdicts come from one call, not two or three.
"""

from __future__ import annotations

from contextlens.metrics.claims import ClaimMetric, ClaimsDetails
from contextlens.metrics.registry import metric

__all__ = ["FaithfulnessDetails", "FaithfulnessMetric"]


class FaithfulnessDetails(ClaimsDetails):
    """A faithfulness result's details: each claim of the answer with its verdict and
    closest chunk (:class:`~contextlens.metrics.claims.ClaimVerdict`)."""


@metric(
    "faithfulness",
    aliases=("FaithfulnessMetric", "Faithfulness", "groundedness"),
    reads=("input", "actual_output", "retrieval_context", "tools_called", "mcp_tools_called"),
    requires=("actual_output", "retrieval_context"),
)
class FaithfulnessMetric(ClaimMetric):
    """Share of the answer's claims that the retrieved chunks support.

    Settings: :class:`~contextlens.metrics.claims.ClaimConfig`.
    """

    details_type = FaithfulnessDetails
    prompt = "faithfulness"
    text_field = "actual_output"
    text_tag = "output"
    text_name = "the answer"
    missing = "faithfulness scores the answer under test"
