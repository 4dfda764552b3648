"""The case fields: one table of every field a case may carry, read by every layer.

Each :class:`CaseField` has its name, the other names it is known by (the seed libraries' and
Ragas's spellings, the columns people write), its type and what it means. The Python case
models (:mod:`contextlens.schemas`), the file loaders, ``calibrate`` and ``contextlens schema``
all read the same table, so a name is accepted, refused or suggested alike everywhere. Which
metrics read or require a field is said by each metric where it is registered.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "INTERACTION_FIELDS",
    "META_PREFIXES",
    "OWN_DATA",
    "SESSION_FIELDS",
    "TEST_CASE_FIELDS",
    "CaseField",
    "FieldTable",
    "Requirement",
    "as_requires",
    "closest",
    "meta_key",
    "unknown_message",
    "unmet_requirement",
]

FieldType = Literal[
    "text",
    "texts",
    "id",
    "ids",
    "graded_ids",
    "number",
    "object",
    "interactions",
    "tool_calls",
    "flag",
    "any",
]


@dataclass(frozen=True)
class CaseField:
    """One field of a case: its name, the names it is also known by, its type, its meaning.

    ``required`` is what the case model itself requires; a metric may require more (see
    :func:`contextlens.metrics.registry.metric`).
    """

    name: str
    type: FieldType
    doc: str
    aliases: tuple[str, ...] = ()
    required: bool = False

    @property
    def type_text(self) -> str:
        """The type as a user reads it."""
        return {
            "text": "text",
            "texts": "a list of texts (in CSV a JSON array, or a Python list as pandas writes it)",
            "id": "text (numbers are read as text)",
            "ids": (
                "a list of ids (in CSV a JSON array, or a Python list as pandas writes it; "
                "numbers are read as text)"
            ),
            "graded_ids": (
                "a list of ids, or an object of id -> grade (a number >= 0; in CSV a JSON array "
                "or object, or a Python list or dict as pandas writes it)"
            ),
            "number": "a number",
            "object": "an object (in CSV a JSON object, or a Python dict as pandas writes it)",
            "interactions": "a list of interaction objects",
            "tool_calls": (
                "a list of tool calls, each with a name and an output (DeepEval's ToolCall, "
                "OpenAI's function call with its result, or an MCP call with its content; in "
                "CSV a JSON array)"
            ),
            "flag": "true or false",
            "any": "any value, kept as given",
        }[self.type]


#: Where a user's own data goes: never scored, kept with the case.
OWN_DATA = "meta"


class FieldTable:
    """The fields of one kind of case, by name and by every alias."""

    def __init__(self, kind: str, fields: Iterable[CaseField]) -> None:
        self.kind = kind
        self.fields: tuple[CaseField, ...] = tuple(fields)
        self._by_name: dict[str, CaseField] = {}
        for f in self.fields:
            for name in (f.name, *f.aliases):
                if name in self._by_name:
                    raise ValueError(f"{kind}: the name {name!r} is taken twice")
                self._by_name[name] = f

    def __iter__(self) -> Any:
        return iter(self.fields)

    def __getitem__(self, name: str) -> CaseField:
        return self._by_name[name]

    def get(self, name: str) -> CaseField | None:
        """The field ``name`` is (its own name or an alias), or None."""
        return self._by_name.get(name)

    @property
    def names(self) -> frozenset[str]:
        """Every name a field of this kind is known by, aliases included."""
        return frozenset(self._by_name)

    def canonical(self, name: str) -> str | None:
        """The field name ``name`` stands for, or None when it is no field of this kind."""
        found = self._by_name.get(name)
        return found.name if found is not None else None

    def unknown(self, name: str, what: str = "field") -> str:
        """Why ``name`` is refused: the closest known name (aliases too), or the field names;
        ``what`` is what it was (a field, a column, a key)."""
        return unknown_message(name, self.names, [f.name for f in self.fields], what=what)

    def of_type(self, kind: FieldType) -> frozenset[str]:
        """Every name (aliases too) of the fields of type ``kind``."""
        return frozenset(n for n, f in self._by_name.items() if f.type == kind)

    def map_keys(
        self, values: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
        """``values`` under their fields' own names, ``meta.NAME`` / ``meta_NAME`` keys
        merged into ``meta`` (as the file loaders merge such columns; a blank value is
        absent), and the keys refused, each as ``(key, kind, why)``: ``unknown_field``, or
        ``field_given_twice`` for a field (or a ``meta`` key) given under two names (which
        would win is a guess)."""
        out: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        own: dict[str, tuple[str, Any]] = {}
        problems: list[tuple[str, str, str]] = []
        for key, value in values.items():
            target = self.canonical(key)
            name = meta_key(key) if target is None and OWN_DATA in self._by_name else None
            if name is not None:
                if value is not None and not (isinstance(value, str) and not value.strip()):
                    own[name] = (key, value)
                continue
            if target is None:
                problems.append((key, "unknown_field", self.unknown(key)))
                continue
            if target in out:
                why = f"given twice, as {given_as[target]!r} and as {key!r}"
                problems.append((key, "field_given_twice", why))
                continue
            out[target] = value
            given_as[target] = key
        if own:
            given = out.get(OWN_DATA)
            meta = dict(given) if isinstance(given, Mapping) else {}
            for name, (key, value) in own.items():
                if name in meta:
                    why = f"the meta key {name!r} is given twice (also in {OWN_DATA!r})"
                    problems.append((key, "field_given_twice", why))
                meta[name] = value
            if given is None or isinstance(given, Mapping):
                out[OWN_DATA] = meta
        return out, problems


#: The prefixes of a column (or key) that holds one key of the user's own data.
META_PREFIXES = (f"{OWN_DATA}.", f"{OWN_DATA}_")


def meta_key(column: str) -> str | None:
    """The ``meta`` key a ``meta.NAME`` / ``meta_NAME`` column (or key) stands for, or
    None."""
    for prefix in META_PREFIXES:
        if column.startswith(prefix) and len(column) > len(prefix):
            return column[len(prefix) :]
    return None


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (case-insensitive), or None when none is close."""
    lowered = {k.lower(): k for k in known}
    found = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[found[0]] if found else None


def unknown_message(
    name: str, known: Iterable[str], listed: Iterable[str] | None = None, what: str = "field"
) -> str:
    """``unknown field; did you mean 'x'?`` (the closest of ``known``; else the ``listed``
    names), with where one's own data goes."""
    names = sorted(known)
    near = closest(name, names)
    shown = ", ".join(sorted(listed if listed is not None else names))
    hint = f"did you mean {near!r}?" if near else f"expected one of {shown}"
    return f"unknown {what}; {hint} (your own data goes in 'meta', 'meta.NAME' or 'meta_NAME')"


_META_DOC = (
    "optional; your own data (an object, or one column per key: meta.NAME / meta_NAME), kept "
    "with the case, never scored"
)

_TOOLS_DOC = (
    "optional; the case's tool calls with their outputs: evidence beside the retrieved chunks "
    "for faithfulness, context recall and the claim diagnostics (shown as tool blocks)"
)

#: DeepEval's ``LLMTestCase`` fields that no metric here reads, with their types: a DeepEval
#: test case is taken as it is, and they are kept with the case.
_DEEPEVAL_UNREAD: tuple[tuple[str, FieldType], ...] = (
    ("expected_tools", "any"),
    ("comments", "text"),
    ("tags", "texts"),
    ("token_cost", "number"),
    ("completion_time", "number"),
    ("flaky", "flag"),
    ("mcp_servers", "any"),
    ("mcp_resources_called", "any"),
    ("mcp_prompts_called", "any"),
    ("custom_column_key_values", "object"),
)

#: Ragas's ``SingleTurnSample`` fields (and its test-set generator's ``synthesizer_name``)
#: that no metric here reads, with their types: a Ragas sample or data set is taken as it is,
#: and they are kept with the case.
_RAGAS_UNREAD: tuple[tuple[str, FieldType], ...] = (
    ("multi_responses", "texts"),
    ("rubrics", "object"),
    ("persona_name", "text"),
    ("query_style", "text"),
    ("query_length", "text"),
    ("synthesizer_name", "text"),
)

TEST_CASE_FIELDS = FieldTable(
    "test case",
    (
        CaseField(
            "name",
            "id",
            "optional; names the case in results, unique in the file",
            aliases=("id",),
        ),
        CaseField(
            "input",
            "text",
            "the user's question; empty or missing is fine for the metrics that do not "
            "require it (a summary has none)",
            aliases=("question", "user_input"),
        ),
        CaseField(
            "actual_output",
            "text",
            "the answer under test",
            aliases=("answer", "output", "response"),
        ),
        CaseField(
            "expected_output",
            "text",
            "the reference answer",
            aliases=("reference", "ground_truth"),
        ),
        CaseField(
            "retrieval_context",
            "texts",
            "the retrieved chunks, in the order the retriever ranked them",
            aliases=("contexts", "retrieved_contexts"),
        ),
        CaseField(
            "context",
            "texts",
            "the ideal context chunks",
            aliases=("reference_contexts",),
        ),
        CaseField(
            "retrieved_ids",
            "ids",
            "the ids of the retrieved chunks, best first (each id once)",
            aliases=("retrieved_context_ids",),
        ),
        CaseField(
            "relevant_ids",
            "graded_ids",
            "the ids of the chunks that are relevant to the input; with grades, graded "
            "relevance (0: judged not relevant)",
            aliases=("reference_context_ids", "expected_ids"),
        ),
        CaseField("tools_called", "tool_calls", _TOOLS_DOC),
        CaseField(
            "mcp_tools_called",
            "tool_calls",
            "optional; DeepEval's MCP tool calls, read as tools_called is",
        ),
        CaseField(
            "multimodal",
            "flag",
            "optional; DeepEval's: true when a text holds an image or PDF placeholder "
            "([DEEPEVAL:IMAGE:...]); set from the texts when not given. Only text is judged",
        ),
        *(
            CaseField(name, kind, "optional; DeepEval's LLMTestCase field, kept, not read")
            for name, kind in _DEEPEVAL_UNREAD
        ),
        *(
            CaseField(name, kind, "optional; Ragas's sample field, kept, not read")
            for name, kind in _RAGAS_UNREAD
        ),
        CaseField(OWN_DATA, "object", _META_DOC, aliases=("additional_metadata", "metadata")),
    ),
)

SESSION_FIELDS = FieldTable(
    "session",
    (
        CaseField(
            "session_id",
            "id",
            "required; rows with the same id form one session",
            required=True,
        ),
        CaseField("assistant_id", "id", "required; the assistant under test", required=True),
        CaseField("language", "text", "optional, default 'english' (null: not given)"),
        CaseField(
            "context",
            "text",
            "required; the session's system context (the same on every row of a session)",
            required=True,
        ),
        CaseField(
            "conversation",
            "interactions",
            "the interactions (JSONL session objects; flat rows are one interaction each); "
            "a session without any has no score",
            required=True,
        ),
        CaseField(OWN_DATA, "object", _META_DOC),
    ),
)

INTERACTION_FIELDS = FieldTable(
    "interaction",
    (
        CaseField("qa_id", "id", "required; unique within the session", required=True),
        CaseField("query", "text", "the user's message (empty or missing: there is none to show)"),
        CaseField("assistant", "text", "required; the assistant's reply", required=True),
        CaseField("ground_truth_assistant", "text", "optional; the reference reply"),
        CaseField("observation", "text", "optional; what the assistant's tools returned"),
        CaseField(
            "retrieval_context",
            "texts",
            "optional; the chunks retrieved for this turn, best first (the turn metrics read "
            "them; a turn without them is not applicable)",
            aliases=("contexts", "retrieved_contexts"),
        ),
        CaseField(
            "retrieved_ids", "ids", "optional; the ids of this turn's retrieved chunks, best first"
        ),
        CaseField("tools_called", "tool_calls", _TOOLS_DOC.replace("case's", "turn's")),
        CaseField(
            "agentic", "object", "optional (null allowed); the agent's own trace (kept, not scored)"
        ),
        CaseField(
            "ground_truth_agentic",
            "object",
            "optional (null allowed); the reference trace (kept, not scored)",
        ),
        CaseField(
            "logprobs", "object", "optional (null allowed); the reply's log-probabilities (kept)"
        ),
        CaseField("weight", "number", "optional; >= 0, the interaction's weight in the session"),
        CaseField(OWN_DATA, "object", _META_DOC),
    ),
)


# --- what a metric requires ---------------------------------------------------------------

#: One field a metric requires: a case field's name, or alternatives of which one is needed.
Requirement = str | tuple[str, ...]


def as_requires(requires: Any) -> tuple[Requirement, ...]:
    """``requires`` as a tuple of field names and tuples of alternatives (TypeError else)."""
    out: list[Requirement] = []
    for need in () if requires is None else requires:
        options = (need,) if isinstance(need, str) else tuple(need) if _many(need) else ()
        if not options or not all(isinstance(o, str) and o for o in options):
            raise TypeError(
                f"requires: each entry is a field name or a tuple of field names, got {need!r}"
            )
        out.append(options[0] if isinstance(need, str) else options)
    return tuple(out)


def _many(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _given(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value) and not value.isspace()  # not value.strip(): no copy of a long text
    return value is not None  # an empty list is given: it says there is nothing


def unmet_requirement(
    case: Any, requires: tuple[Requirement, ...], metric: str
) -> tuple[str, str] | None:
    """The first of ``requires`` that ``case`` (a model or a mapping) does not meet, as
    ``(field, message)``; None when it meets them all. A field is given when it is neither
    null nor blank text (an empty list is given: the metric scores what it says)."""
    for need in requires:
        options = (need,) if isinstance(need, str) else need
        get = case.get if isinstance(case, Mapping) else lambda o: getattr(case, o, None)
        values = [get(o) for o in options]
        if any(_given(v) for v in values):
            continue
        if len(options) > 1:
            names = ", ".join(repr(o) for o in options)
            return options[0], f"metric {metric!r} requires one of {names}; none is given"
        state = "missing" if values[0] is None else "empty"
        return options[0], f"metric {metric!r} requires {options[0]!r}, which is {state}"
    return None
