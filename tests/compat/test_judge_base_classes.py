"""``contextlens.DeepEvalBaseLLM`` and ``contextlens.OpikBaseModel``: a custom judge model
written as DeepEval's and Opik's docs write one, with only the import changed, judges any
metric; the abstract methods are theirs."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from contextlens import (
    ContextPrecision,
    ContextualRelevancyMetric,
    DeepEvalBaseLLM,
    LLMTestCase,
    OpikBaseModel,
)
from contextlens.judges import DeepEvalModelBackend, OpikModelBackend, as_backend
from support.relevancy import REFUND, SHIPPING, rule_reply

PRECISION_CASE = dict(
    input="What is the capital of France?",
    output="The capital of France is Paris.",
    expected_output="Paris",
    context=["Paris is the capital and largest city of France."],
)
VERDICT = json.dumps({"reason": "matches the expected output", "score": 0.9})


class CustomModel(DeepEvalBaseLLM):
    """DeepEval's documented custom LLM: ``load_model``, ``generate`` and ``a_generate``
    with a schema, ``get_model_name``."""

    def __init__(self) -> None:
        self.schemas: list[type[BaseModel]] = []
        super().__init__("my-local-model")

    def load_model(self):
        return "a loaded client"

    def generate(self, prompt: str, schema: type[BaseModel]) -> BaseModel:
        self.schemas.append(schema)
        return schema.model_validate(rule_reply(prompt))

    async def a_generate(self, prompt: str, schema: type[BaseModel]) -> BaseModel:
        return self.generate(prompt, schema)

    def get_model_name(self) -> str:
        return "Custom Llama"


class CustomOpikModel(OpikBaseModel):
    """Opik's documented custom model: ``generate_string`` and ``generate_provider_response``."""

    def __init__(self) -> None:
        super().__init__(model_name="my-opik-model")
        self.inputs: list[str] = []

    def generate_string(self, input: str, response_format=None, **kwargs) -> str:
        self.inputs.append(input)
        return VERDICT

    def generate_provider_response(self, messages, **kwargs):
        return {"choices": [{"message": {"content": VERDICT}}]}


def test_a_deepeval_base_llm_subclass_judges_the_metric():
    model = CustomModel()
    assert model.name == "my-local-model" and model.model == "a loaded client"
    backend = as_backend(model)
    assert isinstance(backend, DeepEvalModelBackend) and backend.model == "Custom Llama"
    metric = ContextualRelevancyMetric(threshold=0.5, model=model)
    test_case = LLMTestCase(
        input="What if these shoes don't fit?", retrieval_context=[REFUND, SHIPPING]
    )
    assert metric.measure(test_case) == 0.5
    assert metric.evaluation_model.endswith("Custom Llama") and metric.success is True
    assert model.schemas and issubclass(model.schemas[0], BaseModel)


def test_an_opik_base_model_subclass_judges_the_metric():
    model = CustomOpikModel()
    assert isinstance(as_backend(model), OpikModelBackend)
    result = ContextPrecision(model=model).score(**PRECISION_CASE)
    assert result.value == 0.9 and result.reason == "matches the expected output"
    assert len(model.inputs) == 1 and "Paris" in model.inputs[0]


def test_an_opik_model_with_only_the_provider_response_is_read_through_it():
    class ProviderOnly(CustomOpikModel):
        def generate_string(self, input: str, response_format=None, **kwargs) -> str:
            raise NotImplementedError

    assert ContextPrecision(model=ProviderOnly()).score(**PRECISION_CASE).value == 0.9


def test_the_abstract_methods_are_the_libraries_own():
    class NoGenerate(DeepEvalBaseLLM):
        def load_model(self):
            return None

        def get_model_name(self):
            return "x"

    with pytest.raises(TypeError, match=r"abstract methods .*a_generate"):
        NoGenerate()

    class NoProvider(OpikBaseModel):
        def generate_string(self, input, response_format=None, **kwargs):
            return ""

    with pytest.raises(TypeError, match="generate_provider_response"):
        NoProvider("m")


def test_the_optional_methods_raise_not_implemented_as_in_the_libraries():
    model = CustomOpikModel()
    with pytest.raises(NotImplementedError):
        model.generate_chat_completion([{"role": "user", "content": "hi"}])
    with pytest.raises(NotImplementedError, match="batch_generate"):
        CustomModel().batch_generate(["a", "b"])
    assert DeepEvalBaseLLM.get_model_name(CustomModel()) == "my-local-model"
