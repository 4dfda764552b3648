"""The worked example of docs/contributing.md runs as written, and the metric it defines
keeps the contract its page describes."""

import asyncio
import re
from pathlib import Path

import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.metrics import registry
from contextlens.metrics.base import Services
from support.schema_judge import SchemaJudge

PAGE = Path(__file__).parents[1] / "docs" / "contributing.md"


@pytest.fixture
def example():
    [code] = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    scope: dict = {}
    try:
        exec(compile(code, str(PAGE), "exec"), scope)  # the page's own asserts run here
        yield scope
    finally:
        registry.unregister("answer-overlap")


def test_the_worked_example_runs_and_its_metric_keeps_the_contract(example):
    metric_type, case = example["AnswerOverlap"], example["case"]
    with pytest.raises(ValueError, match="min_share"):
        metric_type(min_share=2)
    with pytest.raises(TypeError, match="no setting 'min_shar'"):
        metric_type(min_shar=0.5)
    judge = SchemaJudge()
    services = Services(judge=judge, embedder=default_embedder())
    judged = asyncio.run(metric_type().score(case, services))
    assert judged.error is None and judged.details.judge == judge.name and judge.calls == 1
    small = asyncio.run(metric_type(max_prompt_tokens=5).score(case, services))
    assert "over the budget of 5" in small.error and judge.calls == 1  # never sent
