"""gaussia's TechStore example: offline, through LangChain, and through an HTTP server."""

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from contextlens import BayesianMode, Context
from contextlens.testing import FakeOpenAIServer
from support import block_of

EXAMPLE = Path(__file__).parents[2] / "examples" / "context_techstore.py"


@pytest.fixture(scope="module")
def techstore():
    """The example's retriever class (running the example once, offline)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CONTEXTLENS_JUDGE", raising=False)
        return runpy.run_path(str(EXAMPLE), run_name="example")["ContextTestRetriever"]


def test_example_runs_offline_and_flags_the_third_reply():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "CONTEXTLENS"))}
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    scores = dict(re.findall(r"\[(q\d)\] .*score=([0-9.]+)", out.stdout))
    assert set(scores) == {"q1", "q2", "q3"}
    q1, q2, q3 = (float(scores[q]) for q in ("q1", "q2", "q3"))
    assert q3 < 0.5 and q3 < min(q1, q2) - 0.3, out.stdout
    assert re.search(r"Context awareness: [0-9.]+  \[[0-9.]+, [0-9.]+\]", out.stdout)


def _judge(prompt: str) -> str:
    """A rule-based stand-in for a judge model: a reply claiming 24/7 contradicts the hours."""
    reply = block_of(prompt, "assistant_reply")
    score, reason = (0.1, "contradicts the support hours") if "24/7" in reply else (0.95, "ok")
    return "```json\n" + json.dumps({"reason": reason, "score": score}) + "\n```"


def _judge_reply(request: dict) -> str:
    return _judge(request["messages"][-1]["content"])


def test_same_example_with_a_langchain_chat_model(techstore, rule_model):
    model = rule_model(_judge)
    [metric] = Context.run(techstore, model=model, statistical_mode=BayesianMode())
    by_id = {i.qa_id: i for i in metric.interactions}
    assert by_id["q3"].context_awareness == 0.1 and by_id["q1"].context_awareness == 0.95
    assert (
        metric.context_awareness_ci_low
        < metric.context_awareness
        < metric.context_awareness_ci_high
    )


def test_same_example_with_the_openai_compatible_backend(techstore):
    with FakeOpenAIServer(reply=_judge_reply) as server:
        [metric] = Context.run(
            techstore,
            model=f"{server.base_url}#judge-model",
            use_structured_output=True,
            statistical_mode=BayesianMode(),
        )
        assert server.calls == 3
        assert len(server.response_formats) == 3
    by_id = {i.qa_id: i for i in metric.interactions}
    assert by_id["q3"].context_awareness == 0.1
    assert by_id["q1"].context_awareness == by_id["q2"].context_awareness == 0.95
    assert metric.judge == "openai-compat:judge-model" and metric.n_failed == 0
