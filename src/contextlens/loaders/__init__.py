"""Reading cases from files (JSONL, CSV or Parquet) or a pandas DataFrame, as sessions or as
test cases; a dict given in Python is read as a row is.

Sessions (for ``context``): JSONL with one session object per line, or flat rows (CSV,
Parquet, JSONL) with one interaction per row and ``session_id`` + ``qa_id`` columns; the
rows of a session need not be next to each other. Test cases (for the other metrics): one
case per row. Files are UTF-8, with or without a byte-order mark.

Every error names the file, the line (or row) and the field: bytes that are not UTF-8, an
unknown column (with the closest known name), a null or empty required field, a duplicate
case id, session id or ``qa_id`` (naming both lines). Columns of one's own go in a ``meta``
object or ``meta.NAME`` / ``meta_NAME`` columns and are kept in the case's ``meta``.
A list or object column round-trips through pandas in every format: ``to_csv()`` (a list
or dict written as Python writes it is read back as one, never evaluated),
``to_json(orient="records", lines=True)`` and ``to_parquet()`` (read as the DataFrame
was).
:func:`check_cases` reads a whole file once, keeping only what duplicate detection needs,
so a run can refuse a bad file before its first judge call.

- :mod:`~contextlens.loaders.sources`: a file, standard input or a pipe, by format.
- :mod:`~contextlens.loaders.rows`: the rows of a CSV, Parquet or JSONL file, or a
  DataFrame.
- :mod:`~contextlens.loaders.cells`: a cell as the type its field takes; blank and absent.
- :mod:`~contextlens.loaders.columns`: known columns, the user's own, ``meta``.
- :mod:`~contextlens.loaders.testcases`: rows as test cases.
- :mod:`~contextlens.loaders.sessions`: session objects, or rows grouped into sessions.
- :mod:`~contextlens.loaders.reading`: a file's kind and cases; the check of a whole file.
"""

from contextlens.loaders.reading import (
    Counted,
    case_kind,
    check_cases,
    load_cases,
    load_frame,
    numbered_frame,
)
from contextlens.loaders.rows import FRAME, is_frame, read_rows
from contextlens.loaders.sessions import session_object
from contextlens.loaders.sources import FORMATS, readable
from contextlens.loaders.testcases import test_case

__all__ = [
    "FORMATS",
    "FRAME",
    "Counted",
    "case_kind",
    "check_cases",
    "is_frame",
    "load_cases",
    "load_frame",
    "numbered_frame",
    "read_rows",
    "readable",
    "session_object",
    "test_case",
]
