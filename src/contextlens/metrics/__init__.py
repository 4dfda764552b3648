"""The context metrics."""

from contextlens.metrics.context import Context

__all__ = ["Context"]
