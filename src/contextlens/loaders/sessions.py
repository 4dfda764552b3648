"""Sessions: session objects (a JSONL line, a row with a ``conversation``, a dict), or flat
rows of interactions grouped by ``session_id``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from contextlens.errors import InputError
from contextlens.fields import INTERACTION_FIELDS, SESSION_FIELDS
from contextlens.loaders.cells import first_time, is_csv, typed_cell, unit_of, validate
from contextlens.loaders.columns import META, Columns, check_keys, split_meta
from contextlens.loaders.rows import RowSource
from contextlens.retriever import null_message
from contextlens.schemas import Batch, Dataset

__all__ = ["is_session_rows", "numbered_sessions", "session_object", "sessions_from_rows"]

_BATCH_KEYS = INTERACTION_FIELDS.names
_SESSION_KEYS = SESSION_FIELDS.names
_SESSION_FIELDS = tuple(f.name for f in SESSION_FIELDS if f.name not in ("conversation", META))
_ROW_KEYS = frozenset(_SESSION_FIELDS) | _BATCH_KEYS


def session_object(raw: Mapping[str, Any], file: str, line: int) -> Dataset:
    """A session object (a JSONL line, a row with a ``conversation``, a dict), its keys and
    those of its interactions checked; its conversation given as text is read as a JSON
    array or a Python list."""
    check_keys(raw, _SESSION_KEYS, file, line)
    own, meta = split_meta(raw, file, line)
    turns = typed_cell(own.get("conversation"), "interactions", "conversation", file, line)
    if isinstance(turns, list):
        checked = []
        for i, turn in enumerate(turns):
            if isinstance(turn, Mapping):
                where = f"conversation[{i}]."
                check_keys(turn, _BATCH_KEYS, file, line, where)
                fields, turn_meta = split_meta(turn, file, line, where)
                turn = {**fields, META: turn_meta} if turn_meta else fields
            checked.append(turn)
        own["conversation"] = checked
    if meta:
        own[META] = meta
    return validate(Dataset, own, file, line)


def numbered_sessions(source: RowSource) -> Iterator[tuple[int, Dataset]]:
    """Session objects, one a row, with their lines; a repeated ``session_id`` is an error
    naming both lines."""
    name = source.name
    seen: dict[str, int] = {}
    for line, raw in source.rows:
        session = session_object(raw, name, line)
        sid = session.session_id
        first_time(seen, sid, f"session_id {sid!r}", name, line, "session_id")
        yield line, session


def is_session_rows(columns: set[str]) -> bool:
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


def _row_type(column: str) -> Any:
    """The type of a flat session row's column: its session field's, else its
    interaction field's."""
    found = SESSION_FIELDS.get(column) or INTERACTION_FIELDS.get(column)
    return found.type if found is not None else "any"


def sessions_from_rows(source: RowSource, *, keep: bool = True) -> list[tuple[int, Dataset]]:
    """Flat interaction rows grouped into sessions, each with its first line. With
    ``keep=False`` each session holds only its first interaction (enough to check it)."""
    file = source.name
    columns = Columns.of(source, _ROW_KEYS)
    groups: dict[str, _Group] = {}
    for line, row in source.rows:
        columns.check(row, line)
        own, meta = split_meta(row, file, line)
        cells = {k: typed_cell(v, _row_type(k), k, file, line) for k, v in own.items()}
        for key in _REQUIRED:
            if key in cells and cells[key] is None and not is_csv(file):
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
                        f"differs from {unit_of(file)} {group.line} of the same session",
                        file=file,
                        line=line,
                        field=key,
                    )
        fields = {k: v for k, v in cells.items() if k in Batch.model_fields and v is not None}
        fields.setdefault("ground_truth_assistant", "")
        if meta:
            fields[META] = meta
        batch = validate(Batch, fields, file, line)
        what = f"qa_id {batch.qa_id!r} in session {sid!r}"
        first_time(group.qa_lines, batch.qa_id, what, file, line, "qa_id")
        if keep or not group.turns:
            group.turns.append(batch)
    return [
        (g.line, validate(Dataset, {**g.head, "conversation": g.turns}, file, g.line))
        for g in groups.values()
    ]
