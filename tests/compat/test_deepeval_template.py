"""DeepEval's template protocol (``evaluation_template``) made into the prompt of the core
contextual-relevancy metric (:mod:`contextlens.compat.deepeval_template`)."""

import asyncio
import re

import pytest

from contextlens.compat.deepeval_template import ContextualRelevancyTemplate, relevancy_prompt
from contextlens.judges.base import DEFAULT_FENCE
from contextlens.judges.parsing import format_instructions
from contextlens.metrics.base import DataBlocks, Services
from contextlens.metrics.contextual_relevancy import (
    ContextualRelevancyScorer,
    relevancy_messages,
    reply_schema,
)
from support.relevancy import FORMAT_OVERRIDE, REFUND, SHIPPING, RuleJudge, case


def run(scorer, test_case, judge):
    return asyncio.run(scorer.score(test_case, Services(judge=judge, embedder=None)))


# --- evaluation_template --------------------------------------------------------------------


def test_evaluation_template_replaces_the_prompt():
    class Template:
        user = "CUSTOM PROMPT\n$input\n$chunks"

    judge = RuleJudge()
    result = run(
        ContextualRelevancyScorer(prompt=relevancy_prompt(Template)), case(REFUND, SHIPPING), judge
    )
    assert result.score == 0.5
    system, user = judge.prompts[0]
    assert re.match(r"CUSTOM PROMPT\n<input_[0-9a-f]+>\n", user["content"])
    assert "You judge how relevant" in system["content"]  # the default system is kept
    assert "JSON schema" in system["content"] and "JSON schema" not in user["content"]

    class Both:
        system = "MY SYSTEM"
        user = "MY USER $input $chunks"

    judge = RuleJudge()
    run(ContextualRelevancyScorer(prompt=relevancy_prompt(Both())), case(REFUND), judge)
    system, user = judge.prompts[0]
    assert system["content"] == "MY SYSTEM"
    assert "JSON schema" in user["content"]  # appended: no text asked for $format

    judge = RuleJudge()
    scorer = ContextualRelevancyScorer(
        prompt=relevancy_prompt(lambda input, chunks, format: f"MINE {input} {chunks}")
    )
    run(scorer, case(REFUND), judge)
    [only] = judge.prompts[0]
    assert only["role"] == "user" and re.match(r"MINE <input_[0-9a-f]+>\n", only["content"])
    with pytest.raises(TypeError, match="evaluation_template"):
        relevancy_prompt(42)


class DeepEvalStyle:
    """DeepEval's documented custom template: a static ``generate_verdicts`` only."""

    @staticmethod
    def generate_verdicts(input: str, context: str) -> str:
        return f"MY VERDICTS PROMPT\nInput:\n{input}\n\nContext:\n{context}\n\nJSON:\n"


def test_a_deepeval_template_builds_one_user_message_with_the_reply_format_appended():
    chunks = [REFUND, SHIPPING]
    [only] = relevancy_messages("Q?", chunks, prompt=relevancy_prompt(DeepEvalStyle))
    mark = DataBlocks("Q?", f"[1] {REFUND}", f"[2] {SHIPPING}").mark
    text = DeepEvalStyle.generate_verdicts(
        input=f"<input_{mark}>\nQ?\n</input_{mark}>",
        context=f"Chunk 1:\n<chunk_{mark}>\n[1] {REFUND}\n</chunk_{mark}>\n\n"
        f"Chunk 2:\n<chunk_{mark}>\n[2] {SHIPPING}\n</chunk_{mark}>",
    )
    fmt = format_instructions(reply_schema(chunks, True), DEFAULT_FENCE.bos, DEFAULT_FENCE.eos)
    assert only == {"role": "user", "content": f"{text}\n\n{FORMAT_OVERRIDE}\n{fmt}"}
    [without] = relevancy_messages(
        "Q?", chunks, include_reason=False, prompt=relevancy_prompt(DeepEvalStyle)
    )
    assert "how relevant the context is overall" not in without["content"]

    judge = RuleJudge()
    result = run(
        ContextualRelevancyScorer(prompt=relevancy_prompt(DeepEvalStyle)), case(*chunks), judge
    )
    assert judge.calls == 1 and judge.prompts[0][0]["content"].startswith("MY VERDICTS PROMPT")
    assert result.score == 0.5 and result.reason == "1 of 2 statements are relevant. judge says so"


def test_a_template_subclass_that_overrides_nothing_keeps_the_default_prompts():
    class Unchanged(ContextualRelevancyTemplate):
        pass

    chunks = [REFUND, SHIPPING]
    for template in (Unchanged, Unchanged(), ContextualRelevancyTemplate):
        assert relevancy_messages(
            "Q?", chunks, prompt=relevancy_prompt(template)
        ) == relevancy_messages("Q?", chunks)
    judge = RuleJudge()
    result = run(
        ContextualRelevancyScorer(prompt=relevancy_prompt(Unchanged)), case(*chunks), judge
    )
    assert judge.calls == 1  # no reason call: generate_reason is not overridden
    assert judge.prompts[0] == relevancy_messages(case().input, chunks)
    assert result.reason == "1 of 2 statements are relevant. judge says so"
