"""The labelled sources the offline faithfulness scorers are chosen and trained on.

Nine held-out units, from the ``answer adherence`` sets of ``/work/shared/data``:

* natural errors, judged by people: BEGIN dev (dialogue replies of four systems against their
  knowledge snippet), WiCE (Wikipedia sentences against the pages they cite), each of the
  four AttributionBench sources (answers of search-augmented LLMs against the passages they
  cite: ``meta.src_dataset``), Factcheck-GPT (claims of ChatGPT answers against one web
  passage);
* made errors: SummEdits (one source: its inconsistent summaries are small LLM edits of
  consistent ones, made to be inconsistent) and HaluEval QA (hallucinated answers generated
  on purpose and filtered; labels by construction, not per-item judgements).

Selection is decided on the natural sources only; the made ones are scored and shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextlens.calibration import read_labelled
from contextlens.offline.support import SupportItem

DATA = Path("/work/shared/data")
ATTRIBUTION = ("AttributedQA", "AttrScore-GenSearch", "ExpertQA", "Stanford-GenSearch")


@dataclass(frozen=True)
class SourceSpec:
    """One held-out unit: a file, optionally one ``meta.src_dataset`` of it."""

    name: str
    file: str
    natural: bool
    subset: str | None = None


SPECS: tuple[SourceSpec, ...] = (
    SourceSpec("begin_dev", "begin_dev", True),
    SourceSpec("wice", "wice", True),
    *(SourceSpec(f"attribution:{s}", "attribution_bench", True, s) for s in ATTRIBUTION),
    SourceSpec("factcheck_gpt", "factcheck_gpt", True),
    SourceSpec("summedits", "summedits", False),
    SourceSpec("halueval_qa", "halueval_qa", False),
)


def read_rows(data: Path, spec: SourceSpec) -> list[dict[str, Any]]:
    """The rows of one source, in file order, as ``calibrate`` reads them."""
    rows = [row.fields for row in read_labelled(data / f"{spec.file}.jsonl")]
    if spec.subset is not None:
        rows = [r for r in rows if (r.get("meta") or {}).get("src_dataset") == spec.subset]
    return rows


def item(row: dict[str, Any]) -> SupportItem:
    """The item the ``Context`` metric builds for a labelled row (see ``calibrate``)."""
    return SupportItem(
        row["answer"],
        ["\n".join(row.get("contexts") or []), "", ""],
        question=row.get("question") or "",
    )
