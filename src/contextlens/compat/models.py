"""The base classes of a custom judge model, as DeepEval and Opik document them.

    class MyModel(DeepEvalBaseLLM):            # DeepEval's custom LLM
        def load_model(self): ...
        def generate(self, prompt, schema=None): ...
        async def a_generate(self, prompt, schema=None): ...
        def get_model_name(self): ...

    class MyModel(OpikBaseModel):              # Opik's custom model
        def generate_string(self, input, response_format=None, **kwargs): ...
        def generate_provider_response(self, messages, **kwargs): ...

    ContextualRelevancyMetric(model=MyModel())  # or any metric, seed class or evaluate()

For users who no longer install those libraries: the abstract methods are theirs, so a class
written for either library works with only the import changed. contextlens recognises a
model by its methods (:mod:`contextlens.judges.foreign`), so a subclass of the libraries' own
classes, when they are installed, is taken just the same.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel

__all__ = ["DeepEvalBaseLLM", "OpikBaseModel"]


class DeepEvalBaseLLM(ABC):
    """DeepEval's base class of a custom evaluation model.

    ``generate(prompt, schema=None)`` (called in a worker thread) and ``async
    a_generate(prompt, schema=None)`` return the reply: text, an instance of ``schema``
    when they take it, or a ``(reply, cost)`` pair whose cost is counted. ``get_model_name``
    names the model in results and in the cache key. ``__init__(model)`` keeps ``model`` as
    ``name`` and sets ``self.model = self.load_model()``, as DeepEval's does.
    """

    def __init__(self, model: str | None = None, *args: Any, **kwargs: Any) -> None:
        self.name = model
        self.model = self.load_model()

    @abstractmethod
    def load_model(self, *args: Any, **kwargs: Any) -> Any:
        """The model object that answers (kept as ``self.model``)."""

    @abstractmethod
    def generate(self, *args: Any, **kwargs: Any) -> Any:
        """The reply to a prompt."""

    @abstractmethod
    async def a_generate(self, *args: Any, **kwargs: Any) -> Any:
        """The reply to a prompt, asynchronously."""

    @abstractmethod
    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        """The model's name (DeepEval's default: the ``model`` given to ``__init__``)."""
        return str(self.name)

    def batch_generate(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Replies to many prompts at once; optional, as in DeepEval."""
        raise NotImplementedError(f"batch_generate is not implemented for {type(self).__name__}")


class OpikBaseModel(ABC):
    """Opik's base class of a custom evaluation model.

    ``generate_string(input, response_format=None, **kwargs)`` returns the reply text;
    ``generate_provider_response(messages, **kwargs)`` a provider response (with
    ``choices[0].message.content`` and its token usage). ``generate_chat_completion`` and
    the ``agenerate_...`` twins are optional: left as they are here, they raise
    ``NotImplementedError`` and the next way in is taken. ``model_name`` names the model.
    """

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name

    @abstractmethod
    def generate_string(
        self, input: str, response_format: type[BaseModel] | None = None, **kwargs: Any
    ) -> str:
        """The reply text to the prompt ``input``."""

    @abstractmethod
    def generate_provider_response(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """The provider's response to chat ``messages``."""

    def generate_chat_completion(
        self,
        messages: list[dict[str, Any]],
        response_format: type[BaseModel] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The assistant turn ``{"role": "assistant", "content": ...}`` for ``messages``."""
        raise NotImplementedError(f"{type(self).__name__} has no chat completion")

    async def agenerate_string(
        self, input: str, response_format: type[BaseModel] | None = None, **kwargs: Any
    ) -> str:
        """:meth:`generate_string`, asynchronously."""
        raise NotImplementedError(f"{type(self).__name__} has no async generate_string")

    async def agenerate_provider_response(
        self, messages: list[dict[str, Any]], **kwargs: Any
    ) -> Any:
        """:meth:`generate_provider_response`, asynchronously."""
        raise NotImplementedError(f"{type(self).__name__} has no async provider response")

    async def agenerate_chat_completion(
        self,
        messages: list[dict[str, Any]],
        response_format: type[BaseModel] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """:meth:`generate_chat_completion`, asynchronously."""
        raise NotImplementedError(f"{type(self).__name__} has no async chat completion")
