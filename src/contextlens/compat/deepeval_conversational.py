"""DeepEval's ``ConversationalTestCase`` and ``Turn``, read as a session.

    case = ConversationalTestCase(
        turns=[
            Turn(role="user", content="When does the museum open?"),
            Turn(role="assistant", content="At 9am.", retrieval_context=["Opens at 9am."]),
        ]
    )
    evaluate([case.to_dataset()], ["turn-faithfulness"])

Each assistant turn becomes one interaction of the session (:class:`~contextlens.schemas.Batch`)
with its own ``retrieval_context``, ``retrieved_ids`` and ``tools_called``; its query is the
user turns since the previous assistant turn. The session's context is the case's
``context`` chunks (else its ``chatbot_role``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contextlens.schemas import Batch, Dataset

__all__ = ["ConversationalTestCase", "Turn"]


class Turn(BaseModel):
    """One message of a conversation: who said it, what, and (an assistant turn) the chunks
    it retrieved and the tools it called."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    content: str
    user_id: str | None = None
    retrieval_context: list[str] | None = None
    retrieved_ids: list[str] | None = None
    tools_called: Any = None
    additional_metadata: dict[str, Any] | None = None


class ConversationalTestCase(BaseModel):
    """A conversation to evaluate, as DeepEval writes it; :meth:`to_dataset` is the session
    the turn metrics score."""

    model_config = ConfigDict(extra="forbid")

    turns: list[Turn] = Field(min_length=1)
    name: str | None = None
    scenario: str | None = None
    context: list[str] | None = None
    chatbot_role: str | None = None
    user_description: str | None = None
    expected_outcome: str | None = None
    additional_metadata: dict[str, Any] | None = None
    comments: str | None = None
    tags: list[str] | None = None

    def to_dataset(self, session_id: str | None = None, assistant_id: str = "assistant") -> Dataset:
        """The conversation as a session: one interaction per assistant turn (``qa_id`` its
        position in ``turns``); ``session_id`` defaults to the case's ``name``."""
        batches: list[Batch] = []
        asked: list[str] = []
        for i, t in enumerate(self.turns):
            if t.role == "user":
                asked.append(t.content)
                continue
            batches.append(
                Batch(
                    qa_id=f"turn-{i}",
                    query="\n".join(asked),
                    assistant=t.content,
                    retrieval_context=t.retrieval_context,
                    retrieved_ids=t.retrieved_ids,
                    tools_called=t.tools_called,
                    meta=t.additional_metadata or {},
                )
            )
            asked = []
        if not batches:
            raise ValueError("ConversationalTestCase: no assistant turn to evaluate")
        meta = {
            k: v
            for k, v in {
                "scenario": self.scenario,
                "user_description": self.user_description,
                "expected_outcome": self.expected_outcome,
                "comments": self.comments,
                "tags": self.tags,
                **(self.additional_metadata or {}),
            }.items()
            if v is not None
        }
        return Dataset(
            session_id=session_id or self.name or "conversation",
            assistant_id=assistant_id,
            context="\n".join(self.context or []) or self.chatbot_role or "",
            conversation=batches,
            meta=meta,
        )
