"""Context recall: how much of the reference answer do the retrieved chunks hold?

``score = claims of expected_output the chunks support / its claims``, judged against
``retrieval_context`` (:mod:`contextlens.metrics.claims`: one judge call per case, or offline
the support model of the ``Context`` metric, per claim). The reason names the claims the
chunks miss, each with the chunk closest to it. Ragas's ``LLMContextRecall`` and DeepEval's
``ContextualRecallMetric`` measure the same share, DeepEval in two calls per case.
"""

from __future__ import annotations

from contextlens.metrics.claims import ClaimMetric, ClaimsDetails
from contextlens.metrics.registry import metric

__all__ = ["ContextRecallDetails", "ContextRecallMetric"]


class ContextRecallDetails(ClaimsDetails):
    """A context-recall result's details: each claim of the reference answer with its
    verdict and closest chunk (:class:`~contextlens.metrics.claims.ClaimVerdict`)."""


@metric(
    "context-recall",
    aliases=("ContextualRecallMetric", "ContextRecall", "LLMContextRecall"),
    reads=("input", "expected_output", "retrieval_context", "tools_called", "mcp_tools_called"),
    requires=("expected_output", "retrieval_context"),
)
class ContextRecallMetric(ClaimMetric):
    """Share of the reference answer's claims that the retrieved chunks support.

    Settings: :class:`~contextlens.metrics.claims.ClaimConfig`.
    """

    details_type = ContextRecallDetails
    prompt = "context_recall"
    text_field = "expected_output"
    text_tag = "expected_output"
    text_name = "the reference answer"
    missing = "context recall needs the reference answer"
