"""Data shapes shared by everything: the cases metrics score, the key a metric's results go
by, and the result a metric returns."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

from contextlens.fields import (
    INTERACTION_FIELDS,
    SESSION_FIELDS,
    TEST_CASE_FIELDS,
    FieldTable,
)
from contextlens.nesting import MAX_DEPTH, deep_message
from contextlens.tools import ToolCall, tool_calls

__all__ = [
    "Batch",
    "CaseModel",
    "Dataset",
    "ItemBreakdown",
    "IterationLevel",
    "LLMTestCase",
    "MetricDetails",
    "MetricKey",
    "MetricResult",
    "ModelTestCase",
    "SessionMetadata",
    "StreamedBatch",
    "TokenUsage",
    "TriageBand",
    "TriageDecision",
]


def _unfit(value: Any, where: str) -> str | None:
    """What keeps ``value`` from being written into a run's files and read back, or None:
    text that is not valid UTF-8 (a lone surrogate such as ``"\\ud800"`` from a JSON
    escape), or lists, objects and models nested more than :data:`MAX_DEPTH` deep (a cycle
    among them too). Walked without recursion."""
    if value is None or isinstance(value, (bool, int, float)):
        return None
    if isinstance(value, str):
        return _bad_text(value, where)
    stack: list[tuple[str, Any, int]] = [(where, value, 0)]
    while stack:
        at, item, depth = stack.pop()
        if isinstance(item, BaseModel):
            item = dict(item)
        if isinstance(item, dict):
            members: list[tuple[Any, Any]] = [(str(k), v) for k, v in item.items()]
            members += [(_KEY, k) for k in item]
        elif isinstance(item, (list, tuple, set, frozenset)):
            members = list(enumerate(item))
        else:
            continue
        if depth >= MAX_DEPTH:
            return f"{_first_levels(at)}: {deep_message()}"
        for key, child in reversed(members):
            if child is None or isinstance(child, (bool, int, float)):
                continue
            if isinstance(child, str):
                found = None if child.isascii() else _bad_text(child, _member(at, key))
                if found is not None:
                    return found
            else:
                stack.append((_member(at, key), child, depth + 1))
    return None


_KEY = object()  # a dict's key, checked as its members are


def _member(at: str, key: Any) -> str:
    """The path of a member: ``at[3]``, ``at.name``, or ``at (a key)``."""
    if key is _KEY:
        return f"{at} (a key)"
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{at}[{key}]"
    return f"{at}.{key}" if at else str(key)


def _bad_text(text: str, at: str) -> str | None:
    """Why ``text`` cannot be written as UTF-8 (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            "not valid Unicode, so it cannot be written: "
            f"{at}: the text holds {text[exc.start]!r} at position {exc.start}"
        )
    return None


def _first_levels(path: str) -> str:
    """``meta.x[0][0]...``: the field and its first key or position (``meta.x``)."""
    found = re.match(r"[^.\[]*(?:\.[^.\[]*|\[\d+\])?", path)
    return found.group() if found else path


class CaseModel(BaseModel):
    """A case read through its :class:`~contextlens.fields.FieldTable`: every alias of a field
    is taken for it, and a key that is no field is refused naming the closest one (as the
    file loaders do), never silently dropped. Text that could not be written into the run's
    results (a lone surrogate), and a value nested more than
    :data:`~contextlens.nesting.MAX_DEPTH` deep, are refused here, before anything is
    scored."""

    model_config = ConfigDict(extra="forbid")
    fields_table: ClassVar[FieldTable]
    #: Fields of the table this model leaves out (a session's metadata has no conversation).
    omits: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """The model and its field table are one: the same fields (a TypeError names any
        that only one of them has), each field's description its table entry's."""
        super().__pydantic_init_subclass__(**kwargs)
        table = {f.name: f for f in cls.fields_table.fields if f.name not in cls.omits}
        only_model = sorted(set(cls.model_fields) - set(table))
        only_table = sorted(set(table) - set(cls.model_fields))
        if only_model or only_table:
            raise TypeError(
                f"{cls.__name__} and the {cls.fields_table.kind} field table differ: in the "
                f"model only {only_model}, in the table only {only_table}"
            )
        for name, info in cls.model_fields.items():
            info.description = info.description or table[name].doc
        cls.model_rebuild(force=True)

    @model_validator(mode="after")
    def _writable(self) -> CaseModel:
        for name in type(self).model_fields:
            found = _unfit(getattr(self, name), name)
            if found is not None:
                raise ValueError(found)
        return self

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        mapped, problems = cls.fields_table.map_keys(value)
        if problems:
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError(kind, why),
                        loc=(key,),
                        input=value[key],
                    )
                    for key, kind, why in problems
                ],
            )
        return mapped


#: The largest weight an interaction may carry: weights are relative, and a session's sum
#: of weights must stay a finite number.
MAX_WEIGHT = 1e12


def _id_text(value: Any) -> Any:
    """A whole number given as an id is read as its text (``7`` -> ``"7"``)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


#: A chunk's id: non-empty text (whole numbers are read as text).
ChunkId = Annotated[str, BeforeValidator(_id_text), Field(min_length=1)]


def _ids_once(value: Any) -> Any:
    """A ranking lists each chunk once: a repeated id is refused, naming its positions."""
    if isinstance(value, list):
        first: dict[str, int] = {}
        for i, ident in enumerate(value):
            if ident in first:
                raise ValueError(f"id {ident!r} is listed twice (at {first[ident]} and {i})")
            first[ident] = i
    return value


class Batch(CaseModel):
    """One interaction of a session: a user query and the assistant's reply."""

    fields_table = INTERACTION_FIELDS

    qa_id: str
    query: str = ""
    assistant: str
    ground_truth_assistant: str = ""
    observation: str | None = None
    retrieval_context: list[str] | None = None
    """The chunks retrieved for this turn, best first (None: the turn retrieved nothing)."""
    retrieved_ids: list[ChunkId] | None = None
    """The ids of this turn's retrieved chunks, best first."""
    tools_called: list[ToolCall] | None = None
    """The tools this turn called, with their outputs: evidence beside the turn's chunks for
    the turn claim metrics."""
    agentic: dict[str, Any] | None = Field(default_factory=dict)
    ground_truth_agentic: dict[str, Any] | None = Field(default_factory=dict)
    logprobs: dict[str, Any] | None = Field(default_factory=dict)
    weight: float | None = Field(default=None, ge=0, le=MAX_WEIGHT, allow_inf_nan=False)
    meta: dict[str, Any] = Field(default_factory=dict)
    """The user's own data about the interaction; no metric reads it."""

    @field_validator("query", mode="before")
    @classmethod
    def _no_query(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("tools_called", mode="before")
    @classmethod
    def _tool_calls(cls, value: Any) -> Any:
        return tool_calls(value, "tools_called")

    @field_validator("retrieved_ids")
    @classmethod
    def _each_id_once(cls, value: Any) -> Any:
        return _ids_once(value)

    @field_validator("weight", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value


class Dataset(CaseModel):
    """One session of an assistant: its system context and its conversation (which may be
    empty: such a session has no score, and says so)."""

    fields_table = SESSION_FIELDS

    session_id: str
    assistant_id: str
    language: str | None = "english"
    context: str
    conversation: list[Batch]
    meta: dict[str, Any] = Field(default_factory=dict)
    """The user's own data about the session; no metric reads it."""

    @model_validator(mode="after")
    def _unique_qa_ids(self) -> Dataset:
        seen: set[str] = set()
        for batch in self.conversation:
            if batch.qa_id in seen:
                raise ValueError(f"duplicate qa_id {batch.qa_id!r} in session {self.session_id!r}")
            seen.add(batch.qa_id)
        return self


#: A graded relevance judgement: a number >= 0 (0: judged not relevant).
Grade = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: Relevance judgements: a list of relevant ids (each grade 1), or an object id -> grade.
Judgements = Annotated[
    Annotated[list[ChunkId], Tag("ids")] | Annotated[dict[ChunkId, Grade], Tag("grades")],
    Discriminator(lambda value: "grades" if isinstance(value, dict) else "ids"),
]


class IterationLevel(str, Enum):
    """How a retriever hands out its data (gaussia's): whole sessions, or one interaction at a
    time as :class:`StreamedBatch` items."""

    FULL_DATASET = "full_dataset"
    STREAM_SESSIONS = "stream_sessions"
    STREAM_BATCHES = "stream_batches"


class SessionMetadata(CaseModel):
    """What a :class:`StreamedBatch` says of its session: a :class:`Dataset` without its
    conversation."""

    fields_table = SESSION_FIELDS
    omits = frozenset({"conversation"})

    session_id: str
    assistant_id: str
    language: str | None = "english"
    context: str
    meta: dict[str, Any] = Field(default_factory=dict)


class StreamedBatch(BaseModel):
    """One interaction with its session's metadata, as a retriever at
    :attr:`IterationLevel.STREAM_BATCHES` yields them; the interactions of a session are
    gathered by their ``session_id``."""

    model_config = ConfigDict(extra="forbid")

    metadata: SessionMetadata
    batch: Batch


#: The placeholder DeepEval writes for an image or a PDF in a text (``f"{MLLMImage(...)}"``).
MULTIMODAL_PLACEHOLDER = re.compile(r"\[DEEPEVAL:(?:IMAGE|PDF):.*?\]")


class ModelTestCase(CaseModel):
    """One RAG test case (agensight / DeepEval shape); ``name`` identifies it in results.

    Every name of :data:`~contextlens.fields.TEST_CASE_FIELDS` is taken (Ragas's
    ``user_input``, ``retrieved_contexts``, ``response`` and ``reference`` among them, and
    DeepEval's ``LLMTestCase`` and Ragas's sample fields, which are kept but not read); any
    other keyword is refused with the closest field name. ``multimodal`` is True when a text
    holds one of DeepEval's image or PDF placeholders (or when given so); only the text is
    judged.
    """

    fields_table = TEST_CASE_FIELDS

    input: str = ""
    """The user's question; empty when there is none (a summary): a metric that reads it
    requires it."""
    actual_output: str | None = None
    expected_output: str | None = None
    retrieval_context: list[str] | None = None
    context: list[str] | None = None
    retrieved_ids: list[ChunkId] | None = None
    """The ids of the retrieved chunks, best first."""
    relevant_ids: Judgements | None = None
    """The ids of the relevant chunks (each grade 1), or each judged id with its grade."""
    name: str | None = None
    multimodal: bool = False
    tools_called: list[ToolCall] | None = None
    """The tools the assistant called (DeepEval, OpenAI or MCP shapes): their outputs are
    evidence beside the retrieved chunks for the claim metrics."""
    expected_tools: Any = None
    comments: str | None = None
    tags: list[str] | None = None
    token_cost: float | None = None
    completion_time: float | None = None
    flaky: bool = False
    mcp_servers: Any = None
    mcp_tools_called: list[ToolCall] | None = None
    mcp_resources_called: Any = None
    mcp_prompts_called: Any = None
    custom_column_key_values: dict[str, Any] | None = None
    multi_responses: list[str] | None = None
    rubrics: dict[str, Any] | None = None
    persona_name: str | None = None
    query_style: str | None = None
    query_length: str | None = None
    synthesizer_name: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    """The user's own data about the case; no metric reads it."""

    @field_validator("tools_called", "mcp_tools_called", mode="before")
    @classmethod
    def _tool_calls(cls, value: Any, info: ValidationInfo) -> Any:
        return tool_calls(value, info.field_name or "tools_called")

    @field_validator("input", mode="before")
    @classmethod
    def _no_input(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("retrieved_ids", "relevant_ids")
    @classmethod
    def _each_id_once(cls, value: Any) -> Any:
        return _ids_once(value)

    @model_validator(mode="after")
    def _multimodal(self) -> ModelTestCase:
        if not self.multimodal:
            texts = [self.input, self.actual_output, self.expected_output]
            texts += [*(self.retrieval_context or []), *(self.context or [])]
            self.multimodal = any(t and MULTIMODAL_PLACEHOLDER.search(t) for t in texts)
        return self


#: DeepEval's name of a test case: the same class.
LLMTestCase = ModelTestCase


class MetricKey(str):
    """The key a metric's results go by: its registered name (``context-precision``), or,
    for one of several instances of a metric in a run, ``NAME:LABEL``.

    A ``str``, so it is a dict key and a JSON string as it is; :attr:`name` and :attr:`label`
    read its parts.
    """

    SEPARATOR: ClassVar[str] = ":"

    @classmethod
    def of(cls, name: str, label: str | None = None) -> MetricKey:
        """The key of metric ``name`` with ``label`` (None: the metric's plain name)."""
        if label is not None and (not label.strip() or cls.SEPARATOR in label):
            raise ValueError(f"label {label!r}: use a non-empty label without {cls.SEPARATOR!r}")
        return cls(name if label is None else f"{name}{cls.SEPARATOR}{label}")

    @property
    def name(self) -> str:
        """The registered name of the metric."""
        return self.partition(self.SEPARATOR)[0]

    @property
    def label(self) -> str | None:
        """The instance's label, or None."""
        _, sep, label = self.partition(self.SEPARATOR)
        return label if sep else None

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


class TokenUsage(BaseModel):
    """Tokens a metric's judge calls took."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class MetricDetails(BaseModel):
    """What a metric tells about one result besides its score and reason. Each metric has
    its own subclass; these fields mean the same in all of them.

    ``judge``: who scored it (a judge's name, or ``offline``). A failed result keeps
    ``raw_reply``, the judge's last unusable reply, when there was one, and the size limit
    that refused it (``max_prompt_tokens`` / ``max_embed_tokens``) when one did.
    """

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _without_nones(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Fields a metric did not set are left out of what is written."""
        return {k: v for k, v in handler(self).items() if v is not None}

    judge: str | None = None
    usage: TokenUsage | None = None
    attempts: int | None = None
    raw_reply: str | None = None
    max_prompt_tokens: int | None = None
    max_embed_tokens: int | None = None

    def breakdown(self) -> ItemBreakdown | None:
        """What a scored item adds to its metric's breakdown over the run (a cell of a
        cross, shares averaged over the items); None for a metric that has none."""
        return None


@dataclass(frozen=True)
class ItemBreakdown:
    """A scored item's part in its metric's run breakdown
    (:class:`~contextlens.results.Breakdown`): the ``cell`` it falls in, and ``shares`` to
    average over the run (a share of None: the item does not count towards it)."""

    cell: str | None = None
    shares: Mapping[str, float | None] = field(default_factory=dict)


class TriageBand(BaseModel):
    """The offline probabilities a triage run sends to the judge: from ``lower`` to
    ``upper`` (both included). Below ``lower`` or above ``upper`` the calibrated offline
    scorer decides the item and no judge call is made."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lower: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    upper: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _pair(cls, value: Any) -> Any:
        """A ``(lower, upper)`` pair is read as the band."""
        if isinstance(value, (tuple, list)) and len(value) == 2:
            return {"lower": value[0], "upper": value[1]}
        return value

    @model_validator(mode="after")
    def _ordered(self) -> TriageBand:
        if self.lower > self.upper:
            raise ValueError(f"a triage band's lower {self.lower} is above its upper {self.upper}")
        return self

    def decides(self, probability: float) -> bool:
        """Whether the offline scorer decides an item of this ``probability``."""
        return probability < self.lower or probability > self.upper

    def __str__(self) -> str:
        return f"[{self.lower:g}, {self.upper:g}]"


class TriageDecision(BaseModel):
    """Who decided an item of a triage run (``offline`` or ``judge``), the offline
    probability that sent it there (None when the offline scorer gave none) and why
    (``"outside the band [0.1, 0.9]"``, ``"inside the band ..."``, ``"offline: not
    applicable: needs a judge"``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decided_by: Literal["offline", "judge"]
    offline_score: float | None = None
    why: str


class MetricResult(BaseModel):
    """One metric's verdict on one case, as every metric's ``score`` returns it.

    ``score`` is None exactly when ``error`` or ``not_applicable`` is set: a failed item is
    kept with its reason and counted, never scored 0; an item the metric does not apply to
    (an answer that abstains, a case its offline reader cannot decide) says why in
    ``not_applicable`` (``"not applicable: the answer abstains"``) and is counted apart.
    ``details`` is the metric's own :class:`MetricDetails`.
    """

    metric: str
    score: float | None
    reason: str | None = None
    error: str | None = None
    not_applicable: str | None = None
    success: bool | None = None
    details: SerializeAsAny[MetricDetails] = Field(default_factory=MetricDetails)
    cost: float | None = None
    triage: TriageDecision | None = None
    """In a triage run, for a metric with a triage band: who decided the item and why."""

    @property
    def failed(self) -> bool:
        return self.error is not None

    @classmethod
    def not_applying(
        cls, metric: str, why: str, reason: str | None = None, details: MetricDetails | None = None
    ) -> MetricResult:
        """The result of a case the metric does not apply to: no score, ``why`` (``"not
        applicable: ..."``), a longer ``reason`` when there is one."""
        return cls(
            metric=metric,
            score=None,
            not_applicable=why,
            reason=reason,
            details=details if details is not None else MetricDetails(),
        )
