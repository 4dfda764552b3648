"""Tool outputs are evidence beside the retrieved chunks for the claim metrics."""

import asyncio
import json

import pytest
from pydantic import ValidationError

from contextlens.embeddings.adapters import as_embedder
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Services
from contextlens.metrics.faithfulness import FaithfulnessMetric
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support import blocks

CASE = ModelTestCase(
    input="What is the weather in Oslo?",
    actual_output="It is 3 degrees and raining in Oslo.",
    retrieval_context=["Oslo is the capital of Norway."],
    tools_called=[
        {
            "name": "weather",
            "description": "current weather",
            "input_parameters": {"city": "Oslo"},
            "output": "Oslo: 3 degrees, raining.",
        }
    ],
)


def tool_reply(request):
    """The judge says the claim rests on block 2: the tool output after the one chunk."""
    user = request["messages"][-1]["content"]
    assert blocks(user, "tool") == ["Oslo: 3 degrees, raining."]
    claim = {"claim": "It is 3 degrees and raining in Oslo", "chunk": 2, "reason": "tool says so"}
    return json.dumps({"claims": [{**claim, "verdict": "yes"}]})


def test_a_claim_supported_only_by_a_tool_output_names_the_tool_when_judged():
    with FakeOpenAIServer(reply=tool_reply) as server:
        services = Services(judge=resolve_judge(f"{server.base_url}#j"), embedder=None)
        result = asyncio.run(FaithfulnessMetric().score(CASE, services))
        [request] = server.requests
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["claims"]["items"]["properties"]["chunk"]["enum"] == [0, 1, 2]
    [claim] = result.details.claims
    assert result.score == 1.0
    assert claim.chunk is None and claim.tool == "tools_called[0] (weather)"


def test_a_claim_supported_only_by_a_tool_output_is_supported_offline():
    services = Services(judge=None, embedder=as_embedder(None))
    with_tool = asyncio.run(FaithfulnessMetric().score(CASE, services))
    without = asyncio.run(
        FaithfulnessMetric().score(CASE.model_copy(update={"tools_called": None}), services)
    )
    [claim] = with_tool.details.claims
    assert claim.tool == "tools_called[0] (weather)" and claim.chunk is None
    assert with_tool.score > without.score


def test_tool_call_shapes_are_read():
    case = ModelTestCase(
        input="q",
        tools_called=[{"type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}],
        mcp_tools_called=[
            {"name": "m", "arguments": {}, "result": {"content": [{"type": "text", "text": "hi"}]}}
        ],
    )
    assert case.tools_called[0].name == "f" and case.tools_called[0].input == {"x": 1}
    assert case.mcp_tools_called[0].output == "hi"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"name": "x"}, "tools_called must be a list of tool calls"),
        ([{"output": "o"}], r"tools_called\[0\] is not a tool call: name"),
        (["weather"], r"tools_called\[0\] is not a tool call"),
    ],
)
def test_malformed_tool_calls_name_the_field(value, message):
    with pytest.raises(ValidationError, match=message):
        ModelTestCase(input="q", tools_called=value)
    with pytest.raises(ValidationError, match="mcp_" + message):
        ModelTestCase(input="q", mcp_tools_called=value)
