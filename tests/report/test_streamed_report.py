"""The report is written in pieces from scratch files: the same page whatever order the items
come in, memory that does not grow with the run, and no scratch file left behind."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest

from contextlens import ModelTestCase, evaluate
from contextlens.report import render_report, write_report
from contextlens.report.cases import META_TEXT
from contextlens.results import EvalRun


def _case(i: int) -> ModelTestCase:
    return ModelTestCase(
        name=f"case-{i:03d}",
        input=f"Which depot holds order {i}?",
        actual_output=f"Depot {i % 3}.",
        retrieval_context=[f"Order {i} is held at depot {i % 3}.", "Parking is free."],
        retrieved_ids=[f"order-{i}", "parking"],
        relevant_ids=[f"order-{i}"],
        meta={"depot": str(i % 3), "note": "x" * (META_TEXT + 500)},
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = evaluate(
        [_case(i) for i in range(12)],
        ["retrieval", "context-similarity"],
        out=str(tmp_path_factory.mktemp("runs")),
        cache="off",
        progress=False,
    )
    assert run.out_dir is not None
    return Path(run.out_dir)


def _rows(page: str) -> list[list]:
    block = page.split('<script type="application/json" id="cl-rows">')[1].split("</script>")[0]
    return list(json.loads(block)["rows"])


def _details(page: str) -> dict[str, dict]:
    blocks = re.findall(r'<script type="application/json" id="cl-case-\d+">(.*?)</script>', page)
    return {d["id"]: d for d in map(json.loads, blocks)}


def _grown(source: Path, target: Path, n: int, *, reverse: bool = False) -> Path:
    """``source`` with its cases repeated to ``n`` under new ids (items in reverse when
    ``reverse``: each case's metrics far apart)."""
    target.mkdir()
    (target / "summary.json").write_text((source / "summary.json").read_text())
    cases = [json.loads(line) for line in (source / "cases.jsonl").read_text().splitlines()]
    items: dict[str, list[dict]] = {}
    for line in (source / "results.jsonl").read_text().splitlines():
        item = json.loads(line)
        items.setdefault(item["case_id"], []).append(item)
    case_lines, item_lines = [], []
    for i in range(n):
        record = cases[i % len(cases)]
        new_id = f"c{i:06d}"
        case_lines.append(json.dumps({**record, "case_id": new_id}))
        item_lines += [json.dumps({**it, "case_id": new_id}) for it in items[record["case_id"]]]
    if reverse:
        item_lines.reverse()
    (target / "cases.jsonl").write_text("\n".join(case_lines) + "\n")
    (target / "results.jsonl").write_text("\n".join(item_lines) + "\n")
    return target


def test_rows_follow_the_cases_whatever_order_the_items_came_in(folder, tmp_path):
    ordered = render_report(EvalRun.from_folder(_grown(folder, tmp_path / "a", 30)))
    backwards = EvalRun.from_folder(_grown(folder, tmp_path / "b", 30, reverse=True))
    reversed_page = render_report(backwards)
    assert [r[0] for r in _rows(reversed_page)] == [f"c{i:06d}" for i in range(30)]
    assert [r[1:] for r in _rows(reversed_page)] == [r[1:] for r in _rows(ordered)]
    details = _details(reversed_page)
    assert len(details) == 30
    assert all(
        {m["metric"] for m in d["metrics"]} == {"retrieval", "context-similarity"}
        for d in details.values()
    )


def test_a_case_with_items_and_no_case_line_comes_last_with_its_items(folder, tmp_path):
    grown = _grown(folder, tmp_path / "run", 5)
    lines = (grown / "cases.jsonl").read_text().splitlines()
    (grown / "cases.jsonl").write_text("\n".join(lines[1:]) + "\n")  # c000000's line is gone
    page = render_report(EvalRun.from_folder(grown))
    assert [r[0] for r in _rows(page)] == ["c000001", "c000002", "c000003", "c000004", "c000000"]
    assert len(_details(page)["c000000"]["metrics"]) == 2


def test_meta_values_are_cut_in_every_place_the_page_holds_them(folder):
    page = render_report(EvalRun.from_folder(folder))
    note = _rows(page)[0][3]["note"]
    assert len(note) == META_TEXT and note.endswith("…")
    assert next(iter(_details(page).values()))["meta"]["note"] == note
    assert "x" * (META_TEXT + 1) not in page


def test_the_page_written_to_a_file_is_the_page_rendered_and_no_scratch_is_left(folder, tmp_path):
    run = EvalRun.from_folder(folder)
    (tmp_path / "out").mkdir()
    written = write_report(run, tmp_path / "out")
    assert written == tmp_path / "out" / "report.html"
    text = written.read_text(encoding="utf-8")
    rendered = render_report(run)
    assert _rows(text) == _rows(rendered) and _details(text) == _details(rendered)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["report.html"]


def _peak(run: EvalRun, out: Path) -> int:
    tracemalloc.start()
    try:
        write_report(run, out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_memory_the_report_takes_does_not_grow_with_the_run(folder, tmp_path):
    # Traced Python memory: the per-case arrays grow (bytes a case); the items, rows and
    # drill-downs are never all held. 1M cases in bounded RSS: benchmarks/bench_report_memory.py.
    small = EvalRun.from_folder(_grown(folder, tmp_path / "small", 300))
    large = EvalRun.from_folder(_grown(folder, tmp_path / "large", 3_000, reverse=True))
    _peak(small, tmp_path / "warm.html")
    assert _peak(large, tmp_path / "large.html") < 2 * _peak(small, tmp_path / "small.html")
