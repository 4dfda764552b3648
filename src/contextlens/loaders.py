"""Reading cases from files: JSONL, CSV or Parquet, as sessions or as test cases.

Sessions (for ``context``): JSONL with one session object per line, or flat rows (CSV,
Parquet, JSONL) with one interaction per row and ``session_id`` + ``qa_id`` columns; the
rows of a session need not be next to each other. Test cases (for the other metrics): one
case per row. Files are UTF-8, with or without a byte-order mark.

Every error names the file, the line (or row) and the field: bytes that are not UTF-8, an
unknown column (with the closest known name), a null or empty required field, a duplicate
case id, session id or ``qa_id`` (naming both lines). Columns of one's own go in a ``meta``
object or ``meta.NAME`` / ``meta_NAME`` columns and are kept in the case's ``meta``.
:func:`check_cases` reads a whole file once, keeping only what duplicate detection needs,
so a run can refuse a bad file before its first judge call.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from contextlens.errors import InputError
from contextlens.fields import (
    INTERACTION_FIELDS,
    OWN_DATA,
    SESSION_FIELDS,
    TEST_CASE_FIELDS,
    unknown_message,
    unmet_requirement,
)
from contextlens.metrics.metric import Metric
from contextlens.retriever import input_error, jsonl_objects, null_message, utf8_text
from contextlens.schemas import Batch, Dataset, ModelTestCase

#: The longest CSV cell read (the csv module's default, 131,072 characters, would refuse a
#: text the metrics score).
_CSV_CELL_LIMIT = 2**31 - 1
_META = OWN_DATA
_META_PREFIXES = ("meta.", "meta_")
_LIST_FIELDS = TEST_CASE_FIELDS.of_type("texts")
_ID_FIELDS = TEST_CASE_FIELDS.of_type("ids") | TEST_CASE_FIELDS.of_type("graded_ids")

_CASE_KEYS = TEST_CASE_FIELDS.names
_BATCH_KEYS = INTERACTION_FIELDS.names
_SESSION_KEYS = SESSION_FIELDS.names
_SESSION_FIELDS = tuple(f.name for f in SESSION_FIELDS if f.name not in ("conversation", _META))
_ROW_KEYS = frozenset(_SESSION_FIELDS) | _BATCH_KEYS


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or row number, row) pairs of a CSV, Parquet or flat JSONL file."""
    suffix = path.suffix.lower()
    name = str(path)
    if suffix == ".csv":
        csv.field_size_limit(_CSV_CELL_LIMIT)  # long texts are the metrics' to refuse, by size
        with utf8_text(path, newline="") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                extra = row.pop(None, None)  # type: ignore[call-overload]
                if extra and any(str(cell).strip() for cell in extra):
                    raise InputError(
                        f"{len(extra)} more cell(s) than the header has columns",
                        file=name,
                        line=reader.line_num,
                    )
                if not any(str(cell or "").strip() for cell in row.values()):
                    continue  # a blank row (a spreadsheet's trailing ones)
                yield reader.line_num, row
    elif suffix in (".parquet", ".pq"):
        try:
            import pandas as pd
        except ImportError as exc:
            raise InputError(
                "reading Parquet needs pandas and pyarrow: pip install 'contextlens[parquet]'",
                file=name,
            ) from exc
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read Parquet: {exc}", file=name) from exc
        for index, row in enumerate(frame.to_dict(orient="records"), start=1):
            yield index, {str(k): _plain(v) for k, v in row.items()}
    else:
        yield from jsonl_objects(path)


def _plain(value: Any) -> Any:
    """numpy arrays and scalars from Parquet as plain Python values; NaN as None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and value != value:
        return None
    return value


def _cell(value: Any, field: str, file: str, line: int, *, lists: bool = True) -> Any:
    """A cell as the type its field takes: lists from JSON arrays, blanks as absent; a list
    of texts given as blank or null (a CSV's empty cell, pandas' ``None`` in JSON lines or
    Parquet) is an empty list: the row says there are none."""
    if value is None and lists and field in _LIST_FIELDS:
        return []
    if not isinstance(value, str):
        return value
    text = value.strip()
    if lists and field in _ID_FIELDS:
        if not text:
            return None
        if text[0] in "[{":
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"not a JSON array or object: {exc.msg}", file=file, line=line, field=field
                ) from None
        return [text]
    if lists and field in _LIST_FIELDS:
        if not text:
            return []  # a blank cell of chunks: the row says there are none
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                texts = _python_list_of_texts(text)  # as pandas' to_csv() writes a list
                if texts is not None:
                    return texts
                raise InputError(
                    f"not a JSON array: {exc.msg}", file=file, line=line, field=field
                ) from None
        return [value]
    if field == "weight":
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            raise InputError(
                f"expected a number, got {value!r}", file=file, line=line, field=field
            ) from None
    if field in ("observation",) and not text:
        return None
    return value


def _python_list_of_texts(text: str) -> list[str] | None:
    """A Python literal list of strings (``['a', "b"]``, as ``DataFrame.to_csv()`` writes a
    list column), read as a literal and nothing else; None when it is not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _validate(model: type[BaseModel], row: Mapping[str, Any], file: str, line: int) -> Any:
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise input_error(exc, file=file, line=line) from None


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _absent(value: Any, file: str) -> str:
    """Why a required text field given as ``value`` (null or blank) is refused; a CSV has
    no null, only empty or missing cells."""
    if value is None and not _is_csv(file):
        return null_message()
    return "empty is not allowed (expected text)"


def _is_csv(file: str) -> bool:
    return file.lower().endswith(".csv")


# --------------------------------------------------------------------------- columns


def _meta_key(column: str) -> str | None:
    """The metadata key a flat ``meta.NAME`` / ``meta_NAME`` column stands for."""
    for prefix in _META_PREFIXES:
        if column.startswith(prefix) and len(column) > len(prefix):
            return column[len(prefix) :]
    return None


#: The name pandas gives an unnamed column it read (its index, written by ``to_csv()``).
_PANDAS_UNNAMED = re.compile(r"Unnamed: \d+")


def _own(column: str) -> bool:
    """Whether ``column`` holds the user's own data, or is a pandas index column (unnamed,
    or ``Unnamed: 0`` after a round trip through pandas): never scored."""
    return (
        not column.strip()
        or column == _META
        or _meta_key(column) is not None
        or _PANDAS_UNNAMED.fullmatch(column) is not None
    )


def _unknown(
    column: str, known: Iterable[str], *, file: str, line: int | None, where: str = ""
) -> InputError:
    """An unknown column (or key), with the closest known name when there is one."""
    what = "key" if where else "column"
    return InputError(
        unknown_message(column, known, what=what), file=file, line=line, field=where + column
    )


def _check_keys(
    row: Mapping[str, Any], known: frozenset[str], file: str, line: int | None, where: str = ""
) -> None:
    for column in row:
        if column not in known and not _own(column):
            raise _unknown(column, known - {_META}, file=file, line=line, where=where)


@dataclass
class _Columns:
    """Checks the columns of a file: those of each row of a JSONL file, the header of a CSV
    (line 1) or the columns of a Parquet file (no line), once."""

    known: frozenset[str]
    file: str
    each_row: bool
    header_line: int | None = None
    done: bool = False

    @classmethod
    def of(cls, path: Path, known: frozenset[str]) -> _Columns:
        suffix = path.suffix.lower()
        if suffix in (".csv", ".parquet", ".pq"):
            return cls(known, str(path), False, 1 if suffix == ".csv" else None)
        return cls(known, str(path), True)

    def check(self, row: Mapping[str, Any], line: int) -> None:
        if self.each_row:
            _check_keys(row, self.known, self.file, line)
        elif not self.done:
            self.done = True
            _check_keys(row, self.known, self.file, self.header_line)


def _split_meta(
    row: Mapping[str, Any], file: str, line: int, where: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A row's own columns and its metadata: the ``meta`` object (a JSON object in CSV)
    merged with the ``meta.NAME`` / ``meta_NAME`` columns."""
    meta: dict[str, Any] = {}
    given = row.get(_META)
    if isinstance(given, str) and given.strip():
        with contextlib.suppress(json.JSONDecodeError):
            given = json.loads(given)
    if not _blank(given):
        if not isinstance(given, dict):
            raise InputError(
                f"expected a JSON object, got {given!r:.60}",
                file=file,
                line=line,
                field=where + _META,
            )
        meta.update(given)
    rest: dict[str, Any] = {}
    for column, value in row.items():
        key = _meta_key(column)
        if key is None:
            if not _own(column):  # neither own data nor a pandas index column
                rest[column] = value
        elif not _blank(value):
            if key in meta:
                raise InputError(
                    f"the meta key {key!r} is given twice",
                    file=file,
                    line=line,
                    field=where + column,
                )
            meta[key] = value
    return rest, meta


# --------------------------------------------------------------------------- test cases


def test_case(row: Mapping[str, Any], file: str | None, line: int) -> ModelTestCase:
    """One row (its columns read through the field table) as a test case; errors name the
    file, the line and the column."""
    file = file or "<rows>"
    own, meta = _split_meta(row, file, line)
    mapped: dict[str, Any] = {}
    empty: dict[str, tuple[str, Any]] = {}
    for key, value in own.items():
        target = TEST_CASE_FIELDS.canonical(key)
        if target is None:
            raise _unknown(key, _CASE_KEYS, file=file, line=line)
        if target == _META:
            continue
        cell = _cell(value, key, file, line)
        if _blank(cell) or cell == []:  # another name of the field may hold its value
            empty.setdefault(target, (key, cell))
        elif target not in mapped:
            mapped[target] = cell
    for target, (key, cell) in empty.items():
        if target in mapped:
            continue
        if cell == []:  # a blank cell of chunks: the row says there are none
            mapped[target] = []
        elif ModelTestCase.model_fields[target].is_required():
            raise InputError(_absent(cell, file), file=file, line=line, field=key)
    if mapped.get("name") is not None:
        mapped["name"] = str(mapped["name"])
    if meta:
        mapped[_META] = meta
    return _validate(ModelTestCase, mapped, file, line)


def _test_cases(
    rows: Iterator[tuple[int, dict[str, Any]]], path: Path
) -> Iterator[tuple[int, ModelTestCase]]:
    """Test cases with their lines; a repeated id is an error naming both lines."""
    name = str(path)
    columns = _Columns.of(path, _CASE_KEYS)
    seen: dict[str, int] = {}
    for line, row in rows:
        columns.check(row, line)
        case = test_case(row, name, line)
        if case.name is not None:
            column = next(
                (k for k in row if TEST_CASE_FIELDS.canonical(k) == "name" and not _blank(row[k])),
                "id",
            )
            _first_time(seen, case.name, f"id {case.name!r}", name, line, column)
        yield line, case


def _first_time(
    seen: dict[str, int], key: str, what: str, file: str, line: int, field: str
) -> None:
    """Note that ``key`` is on ``line``; an :class:`InputError` naming both lines when an
    earlier line had it."""
    first = seen.setdefault(key, line)
    if first != line:
        raise InputError(
            f"duplicate {what} (also on line {first})", file=file, line=line, field=field
        )


# --------------------------------------------------------------------------- sessions


def _session(raw: Mapping[str, Any], file: str, line: int) -> Dataset:
    """A JSONL session object, its keys and those of its interactions checked."""
    _check_keys(raw, _SESSION_KEYS, file, line)
    own, meta = _split_meta(raw, file, line)
    turns = own.get("conversation")
    if isinstance(turns, list):
        checked = []
        for i, turn in enumerate(turns):
            if isinstance(turn, Mapping):
                where = f"conversation[{i}]."
                _check_keys(turn, _BATCH_KEYS, file, line, where)
                fields, turn_meta = _split_meta(turn, file, line, where)
                turn = {**fields, _META: turn_meta} if turn_meta else fields
            checked.append(turn)
        own["conversation"] = checked
    if meta:
        own[_META] = meta
    return _validate(Dataset, own, file, line)


def _sessions(path: Path) -> Iterator[tuple[int, Dataset]]:
    """JSONL session objects with their lines; a repeated ``session_id`` is an error
    naming both lines."""
    name = str(path)
    seen: dict[str, int] = {}
    for line, raw in jsonl_objects(path):
        session = _session(raw, name, line)
        sid = session.session_id
        _first_time(seen, sid, f"session_id {sid!r}", name, line, "session_id")
        yield line, session


def _is_session_rows(columns: set[str]) -> bool:
    return {"session_id", "qa_id"} <= columns


@dataclass
class _Group:
    """One session's rows: its first line, its session fields, its interactions (all, or
    only the first when only checking), and the line of each ``qa_id``."""

    line: int
    head: dict[str, Any]
    turns: list[Batch] = field(default_factory=list)
    qa_lines: dict[str, int] = field(default_factory=dict)


#: The fields of a session row that must not be null, in the order they are checked.
_REQUIRED = tuple(
    name
    for model in (Dataset, Batch)
    for name, info in model.model_fields.items()
    if info.is_required() and name != "conversation"
)


def _sessions_from_rows(
    rows: Iterator[tuple[int, dict[str, Any]]], path: Path, *, keep: bool = True
) -> list[tuple[int, Dataset]]:
    """Flat interaction rows grouped into sessions, each with its first line. With
    ``keep=False`` each session holds only its first interaction (enough to check it)."""
    file = str(path)
    columns = _Columns.of(path, _ROW_KEYS)
    groups: dict[str, _Group] = {}
    for line, row in rows:
        columns.check(row, line)
        own, meta = _split_meta(row, file, line)
        cells = {k: _cell(v, k, file, line, lists=False) for k, v in own.items()}
        for key in _REQUIRED:
            if key in cells and cells[key] is None and not _is_csv(file):
                raise InputError(null_message(), file=file, line=line, field=key)
        sid = cells.get("session_id")
        if sid in (None, ""):
            raise InputError("required", file=file, line=line, field="session_id")
        sid = str(sid)
        head = {k: cells.get(k) for k in _SESSION_FIELDS if cells.get(k) not in (None, "")}
        group = groups.get(sid)
        if group is None:
            group = groups[sid] = _Group(line, head)
        else:
            for key, value in head.items():
                if key in group.head and group.head[key] != value:
                    raise InputError(
                        f"differs from line {group.line} of the same session",
                        file=file,
                        line=line,
                        field=key,
                    )
        fields = {k: v for k, v in cells.items() if k in Batch.model_fields and v is not None}
        fields.setdefault("ground_truth_assistant", "")
        if meta:
            fields[_META] = meta
        batch = _validate(Batch, fields, file, line)
        what = f"qa_id {batch.qa_id!r} in session {sid!r}"
        _first_time(group.qa_lines, batch.qa_id, what, file, line, "qa_id")
        if keep or not group.turns:
            group.turns.append(batch)
    return [
        (g.line, _validate(Dataset, {**g.head, "conversation": g.turns}, file, g.line))
        for g in groups.values()
    ]


# --------------------------------------------------------------------------- reading a file


def _numbered(
    path: Path, *, keep: bool = True
) -> tuple[str, Iterator[tuple[int, Dataset]] | Iterator[tuple[int, ModelTestCase]]]:
    """The kind of the file's cases and the cases with their lines (flat session rows:
    the first line of each session)."""
    rows = read_rows(path)
    first = _first_row(path, rows)
    kind = _kind_of(first[1])
    if kind == "session_objects":
        rows.close()
        return "sessions", _sessions(path)

    def chained() -> Iterator[tuple[int, dict[str, Any]]]:
        yield first
        yield from rows

    if kind == "sessions":
        return "sessions", iter(_sessions_from_rows(chained(), path, keep=keep))
    return "test_cases", _test_cases(chained(), path)


def _first_row(
    path: Path, rows: Iterator[tuple[int, dict[str, Any]]]
) -> tuple[int, dict[str, Any]]:
    if not path.exists():
        raise InputError("no such file", file=str(path))
    first = next(rows, None)
    if first is None:
        raise InputError("the file holds no rows", file=str(path))
    return first


def _kind_of(row: Mapping[str, Any]) -> str:
    if "conversation" in row:
        return "session_objects"
    return "sessions" if _is_session_rows(set(row)) else "test_cases"


def case_kind(path: str | Path) -> str:
    """The kind of cases a file holds, ``"sessions"`` or ``"test_cases"``, from its first
    row."""
    path = Path(path)
    rows = read_rows(path)
    try:
        kind = _kind_of(_first_row(path, rows)[1])
    finally:
        rows.close()
    return "sessions" if kind == "session_objects" else kind


def load_cases(path: str | Path) -> tuple[str, Iterator[Dataset] | Iterator[ModelTestCase]]:
    """The cases of a file and their kind: ``"sessions"`` or ``"test_cases"``.

    JSONL session objects and all test cases are read lazily (an error is raised when its
    line is reached); flat session rows are grouped, which reads the whole file.
    """
    kind, numbered = _numbered(Path(path))
    return kind, (case for _, case in numbered)  # type: ignore[return-value]


#: The formats a file of cases may be in, by suffix.
FORMATS = {"jsonl": ".jsonl", "json": ".jsonl", "csv": ".csv", "parquet": ".parquet"}


@contextlib.contextmanager
def readable(source: str | Path, fmt: str | None = None) -> Iterator[Path]:
    """A path that can be read as many times as a run reads its file: ``source`` itself when
    it is a regular file, else (``-`` for standard input, a named pipe, ``<(command)``) a
    temporary copy of what it streams, removed afterwards. ``fmt`` (jsonl, csv, parquet)
    names the format where there is no suffix to tell it (default: JSONL)."""
    path = Path(source)
    if fmt is not None and fmt.lower() not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use jsonl, csv or parquet", file=str(source))
    is_stdin = str(source) == "-"
    if not is_stdin and (not path.exists() or path.is_file()):
        if fmt is not None and FORMATS[fmt.lower()] != _suffix_of(path):
            raise InputError(f"the file's suffix says {path.suffix!r}, not {fmt}", file=str(path))
        yield path
        return
    if not is_stdin and path.is_dir():
        raise InputError("is a folder, not a file of cases", file=str(path))
    suffix = FORMATS[(fmt or "jsonl").lower()]
    with tempfile.TemporaryDirectory(prefix="contextlens-input-") as folder:
        copy = Path(folder) / f"stdin{suffix}" if is_stdin else Path(folder) / f"input{suffix}"
        try:
            stream = sys.stdin.buffer if is_stdin else open(path, "rb")  # noqa: SIM115
            with copy.open("wb") as out:
                shutil.copyfileobj(stream, out)
            if not is_stdin:
                stream.close()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", file=str(source)) from None
        yield copy


def _suffix_of(path: Path) -> str:
    suffix = path.suffix.lower()
    return (
        ".parquet"
        if suffix == ".pq"
        else ".csv"
        if suffix == ".csv"
        else (".parquet" if suffix == ".parquet" else ".jsonl")
    )


class Counted(Iterator[Any]):
    """Cases read lazily whose number is known (from :func:`check_cases`): ``len()`` gives
    it, so a run can show its progress against the total."""

    def __init__(self, cases: Iterator[Any], count: int) -> None:
        self._cases = cases
        self._count = count

    def __iter__(self) -> Counted:
        return self

    def __next__(self) -> Any:
        return next(self._cases)

    def __len__(self) -> int:
        return self._count


def check_cases(
    path: str | Path, metrics: Sequence[tuple[str, Metric[Any]]] = ()
) -> tuple[str, int]:
    """Read the whole file once and raise the first problem :func:`load_cases` would meet,
    or a case missing a field that one of ``metrics`` (``(name, metric)`` pairs) requires;
    return the kind and the number of cases.

    Memory stays flat: only the ids seen are kept (for flat session rows, each session's
    fields, first interaction and ``qa_id`` lines).
    """
    path = Path(path)
    kind, numbered = _numbered(path, keep=False)
    needs = [(name, m, m.requires) for name, m in metrics]
    count = 0
    for line, case in numbered:
        count += 1
        for name, m, requires in needs:
            if not isinstance(case, m.case_type):
                continue
            unmet = unmet_requirement(case, requires, name)
            if unmet is not None:
                raise InputError(unmet[1], file=str(path), line=line, field=unmet[0])
    return kind, count
