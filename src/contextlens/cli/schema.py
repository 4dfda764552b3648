"""``contextlens schema``: the metrics, and the fields of each kind of case with the metrics
that read or require each."""

from __future__ import annotations

from typing import Any

from contextlens.cli.application import out
from contextlens.cli.run.plan import kind_name
from contextlens.fields import FieldTable
from contextlens.terminal import table


def _needs(requires: tuple[Any, ...]) -> str:
    return (
        ", ".join(r if isinstance(r, str) else f"one of ({', '.join(r)})" for r in requires) or "-"
    )


def _field_rows(fields: FieldTable, infos: list[Any]) -> list[list[str]]:
    rows = []
    for f in fields:
        readers = [i.name for i in infos if f.name in i.reads]
        needing = [
            i.name
            for i in infos
            if any(f.name == r or (not isinstance(r, str) and f.name in r) for r in i.requires)
        ]
        rows.append(
            [
                f.name,
                ", ".join(f.aliases) or "-",
                f.type_text,
                f.doc,
                ", ".join(readers) or "-",
                ", ".join(needing) or "-",
            ]
        )
    return rows


def schema() -> None:
    """The metrics, what each takes, and the fields of each kind of input file."""
    from contextlens.fields import INTERACTION_FIELDS, SESSION_FIELDS, TEST_CASE_FIELDS
    from contextlens.metrics import registry
    from contextlens.schemas import Dataset, ModelTestCase

    infos = list(registry.registered().values())
    rows = [
        [
            info.name,
            kind_name(info.case_type),
            ", ".join(info.reads) or "-",
            _needs(info.requires),
            info.description,
        ]
        for info in infos
    ]
    headers = ["metric", "takes", "reads", "requires", "what it measures"]
    out.print(table("Metrics (-m NAME)", headers, rows))
    field_headers = ["field", "also", "type", "meaning", "read by", "required by"]
    sessions = [i for i in infos if issubclass(Dataset, i.case_type)]
    cases = [i for i in infos if issubclass(ModelTestCase, i.case_type)]
    for title, fields, readers in (
        ("Test cases — one case per row:", TEST_CASE_FIELDS, cases),
        (
            "Sessions — JSONL objects with a `conversation` list, or one interaction per row:",
            SESSION_FIELDS,
            sessions,
        ),
        (
            "Interactions — the items of `conversation`, or one per row:",
            INTERACTION_FIELDS,
            sessions,
        ),
    ):
        out.print(table(title, field_headers, _field_rows(fields, readers), fold=field_headers))
