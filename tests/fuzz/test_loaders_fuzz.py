"""Property-based fuzzing of the case loaders: whatever bytes a JSONL or CSV file holds, reading
it gives cases or an InputError naming the file (never another exception, never a silent
loss), and a file written the way spreadsheets write it reads the same as a plain one."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextlens.errors import InputError
from contextlens.loaders import load_cases

FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# A bare carriage return inside an unquoted CSV cell makes a malformed file (spreadsheets quote
# it); the writer below quotes what it must, so texts hold none.
words = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"),
    min_size=1,
    max_size=30,
)
cases = st.lists(
    st.fixed_dictionaries(
        {
            "input": words.filter(str.strip),
            "actual_output": words.filter(str.strip),
            "retrieval_context": st.lists(words.filter(str.strip), min_size=1, max_size=3),
        }
    ),
    min_size=1,
    max_size=5,
)


def read_all(path: Path) -> list:
    _, found = load_cases(path)
    return list(found)


def write(suffix: str, data: bytes) -> Path:
    with tempfile.NamedTemporaryFile(suffix=suffix, delete=False) as handle:
        handle.write(data)
    return Path(handle.name)


@FUZZ
@given(st.binary(max_size=400), st.sampled_from([".jsonl", ".csv"]))
def test_any_bytes_give_cases_or_an_input_error_naming_the_file(data: bytes, suffix: str):
    path = write(suffix, data)
    try:
        read_all(path)
    except InputError as exc:
        assert path.name in str(exc)
    finally:
        path.unlink()


def as_csv(rows: list[dict], *, bom: bool, newline: str) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator=newline)
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, "retrieval_context": json.dumps(row["retrieval_context"])})
    return ("\ufeff" if bom else "").encode() + out.getvalue().encode()


@FUZZ
@given(cases, st.booleans(), st.sampled_from(["\n", "\r\n"]))
def test_a_spreadsheet_csv_reads_like_the_jsonl_of_the_same_cases(rows, bom, newline):
    plain = write(".jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    sheet = write(".csv", as_csv(rows, bom=bom, newline=newline))
    try:
        from_jsonl, from_csv = read_all(plain), read_all(sheet)
    finally:
        plain.unlink()
        sheet.unlink()
    assert [c.model_dump() for c in from_csv] == [c.model_dump() for c in from_jsonl]
    assert [c.input for c in from_csv] == [r["input"] for r in rows]
