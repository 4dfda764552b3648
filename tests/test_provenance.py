"""Every run's provenance (versions, data file, command, platform): written to summary.json
and the run store, read back typed from either, and compared alike from folders and ids."""

from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path

import pytest

from contextlens import provenance
from contextlens.comparability import differences
from contextlens.compare import compare
from contextlens.errors import InputError
from contextlens.provenance import DataFile, Provenance, current_provenance, file_sha256
from contextlens.report.comparison import render_comparison
from contextlens.report.markdown import comparison_markdown
from contextlens.results import EvalRun, RecordedConfig
from contextlens.runner import RunConfig, evaluate
from contextlens.schemas import ModelTestCase
from contextlens.store import RunStore
from contextlens.testing import FakeOpenAIServer

ROWS = [
    {"name": "a", "input": "When?", "actual_output": "At 9.", "retrieval_context": ["9 am."]},
    {"name": "b", "input": "Where?", "actual_output": "Here.", "retrieval_context": ["Main St."]},
]


def write_cases(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run_command(run_cli, cases: Path, out: Path, store: Path, *extra: object) -> Path:
    """One ``contextlens run`` of ``cases``: the folder it wrote."""
    code, text = run_cli(
        "run", cases, "-m", "context-similarity", "--out", out, "--store", store, "-q", *extra
    )
    assert code == 0, text
    return (out / "latest").resolve()


def test_two_run_folders_warn_of_their_version_and_data_as_their_ids_do(
    run_cli, tmp_path, monkeypatch
):
    store = tmp_path / "runs.sqlite3"
    old = write_cases(tmp_path / "old.jsonl", ROWS)
    monkeypatch.setattr(provenance, "contextlens_version", lambda: "0.0.9")
    first = run_command(run_cli, old, tmp_path / "out", store)
    changed = [ROWS[0], {**ROWS[1], "actual_output": "On Main St."}]  # same ids, other data
    new = write_cases(tmp_path / "new.jsonl", changed)
    monkeypatch.setattr(provenance, "contextlens_version", lambda: "0.1.0")
    second = run_command(run_cli, new, tmp_path / "out", store)

    written = json.loads((first / "summary.json").read_text())["provenance"]
    assert written["contextlens"] == "0.0.9"
    assert written["data_file"] == {"path": str(old), "sha256": file_sha256(old)}

    by_folder = compare(str(first), str(second))  # no store: the folders alone
    by_id = compare(first.name, second.name, store=RunStore(store))
    assert by_folder.warnings == by_id.warnings
    by_kind = {(w.kind, w.message.split(" (")[0]): w for w in by_folder.warnings}
    version = by_kind[("version", "contextlens 0.0.9 made A, contextlens 0.1.0 B")]
    assert version.severity == "warning"
    data = by_kind[("data", "the data files differ")]
    assert f"SHA-256 {file_sha256(old)[:12]} in A" in data.message
    assert f"SHA-256 {file_sha256(new)[:12]} in B" in data.message

    code, text = run_cli("compare", first, second, "--out", tmp_path / "page.html")
    assert code == 0, text
    assert "contextlens 0.0.9 made A, contextlens 0.1.0 B" in text
    assert "the data files differ" in text
    page = (tmp_path / "page.html").read_text()
    assert 'data-kind="version" data-severity="warning"' in page
    assert 'data-kind="data" data-severity="warning"' in page
    assert "contextlens 0.0.9 made A, contextlens 0.1.0 B" in page


def test_an_old_summary_without_provenance_loads_and_compares(run_cli, tmp_path):
    cases = [ModelTestCase(**row) for row in ROWS]
    options = {"cache": False, "progress": False, "out": tmp_path / "out"}
    old = evaluate(cases, ["context-similarity"], **options)
    new = evaluate(cases, ["context-similarity"], **options)
    summary = Path(old.out_dir) / "summary.json"
    data = json.loads(summary.read_text())
    for key in ("provenance", "config", "data_fingerprint", "stopped"):  # not yet written then
        del data[key]
    summary.write_text(json.dumps(data))

    loaded = EvalRun.from_folder(old.out_dir)
    assert loaded.provenance is None and loaded.config == RecordedConfig()
    assert new.provenance is not None
    assert EvalRun.from_folder(new.out_dir).provenance == new.provenance
    result = compare(old.out_dir, new.out_dir)
    assert result.metric("context-similarity").verdict == "identical scores"
    [note] = result.warnings
    assert (note.kind, note.severity) == ("version", "note")
    assert note.message.startswith("run A does not record its provenance")
    code, text = run_cli("compare", old.out_dir, new.out_dir, "--out", tmp_path / "c.html")
    assert code == 0, text
    assert "note run A does not record its provenance" in text


def test_a_summary_that_is_not_one_is_a_clear_error(tmp_path):
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(InputError, match=r"summary\.json:1: not the summary of a run"):
        EvalRun.from_folder(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"run_id": "x", "provenance": 3}))
    with pytest.raises(InputError, match="not the summary of a run"):
        EvalRun.from_folder(tmp_path)


def test_the_command_recorded_from_the_cli_masks_a_key_given_on_it(run_cli, tmp_path):
    key = "sk-test-" + secrets.token_hex(12)
    cases = write_cases(tmp_path / "cases.jsonl", ROWS)
    store = tmp_path / "runs.sqlite3"
    with FakeOpenAIServer() as server:
        judge = server.base_url.replace("http://", f"http://user:{key}@") + "#local-model"
        folder = run_command(
            run_cli, cases, tmp_path / "out", store, "--judge", judge, "--cache", "off"
        )
    command = json.loads((folder / "summary.json").read_text())["provenance"]["command"]
    assert "run" in command and "--judge" in command and "http://***@127.0.0.1" in command
    assert key not in command
    stored = RunStore(store).load(folder.name).provenance
    assert stored is not None and stored.command == command
    for path in [*folder.rglob("*"), store]:
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_a_run_from_python_records_no_command_and_its_data_file(tmp_path):
    cases_file = write_cases(tmp_path / "cases.jsonl", ROWS)
    cases = [ModelTestCase(**row) for row in ROWS]
    run = evaluate(cases, ["context-similarity"], cache=False, progress=False, data_file=cases_file)
    assert run.provenance is not None and run.provenance.command is None
    assert run.provenance.data_file == DataFile(
        path=str(cases_file), sha256=file_sha256(cases_file)
    )
    assert run.provenance.python and run.provenance.platform
    assert "numpy" in run.provenance.packages and "pydantic" in run.provenance.packages
    with pytest.raises(ValueError, match="cannot read the data file"):
        RunConfig.of(data_file=tmp_path / "missing.jsonl")


def test_provenance_round_trips_through_the_store_and_old_rows_give_theirs(tmp_path):
    path = tmp_path / "runs.sqlite3"
    cases = [ModelTestCase(**row) for row in ROWS]
    data = write_cases(tmp_path / "cases.jsonl", ROWS)
    run = evaluate(cases, ["context-similarity"], cache=False, progress=False, data_file=data)
    with RunStore(path) as store:
        store.record(run, config={"metrics": ["context-similarity"]})
        loaded = store.load(run.run_id)
        assert loaded.provenance == run.provenance
        assert (loaded.dataset, loaded.dataset_fingerprint) == (str(data), file_sha256(data))
        assert loaded.config.model_extra == {"metrics": ["context-similarity"]}
    conn = sqlite3.connect(path)  # as a store of version 3 kept it: no provenance column
    conn.executescript("ALTER TABLE runs DROP COLUMN provenance; PRAGMA user_version = 3;")
    conn.close()
    with RunStore(path) as migrated:
        legacy = migrated.load(run.run_id).provenance
        assert legacy is not None and legacy.contextlens == run.provenance.contextlens
        assert legacy.data_file == run.provenance.data_file
        assert legacy.packages["numpy"] == run.provenance.packages["numpy"]
        migrated.record(run)  # and the file of version 3 takes provenance again
        assert migrated.load(run.run_id).provenance == run.provenance


def _run(made: Provenance) -> EvalRun:
    return EvalRun(
        run_id="r",
        started_at="2024-05-01T10:00:00+00:00",
        duration_s=0.0,
        judge="offline",
        embedder="minilm",
        repeats=1,
        summaries={},
        provenance=made,
    )


def test_python_and_runtime_versions_differ_as_a_note():
    made = current_provenance()
    other = made.model_copy(
        update={"python": "3.99.0", "packages": {**made.packages, "onnxruntime": "0.0.1"}}
    )
    [note] = differences(_run(made), _run(other))
    assert (note.kind, note.severity) == ("environment", "note")
    assert f"Python {made.python} in A, 3.99.0 in B" in note.message
    assert f"onnxruntime {made.packages['onnxruntime']} in A, 0.0.1 in B" in note.message
    assert differences(_run(made), _run(made)) == []
    comparison = compare(_run(made), _run(other))
    assert "> **Note:**" in comparison_markdown(comparison)
    assert 'data-severity="note"' in render_comparison(comparison)
