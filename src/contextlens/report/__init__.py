"""The HTML report: one self-contained page per run (and optionally a comparison)."""

from contextlens.report import rag_evidence  # noqa: F401  # adds its evidence readers
from contextlens.report.html import render_report, write_report

__all__ = ["render_report", "write_report"]
