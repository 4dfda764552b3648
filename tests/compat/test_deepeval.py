"""DeepEval's surface: ``contextlens.ContextualRelevancyMetric`` (a shell over
ContextualRelevancyScorer, whose own logic is tested in
tests/metrics/test_contextual_relevancy.py)."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

import contextlens
from contextlens import ContextualRelevancyMetric, ContextualRelevancyTemplate
from contextlens.errors import InputError, MetricComputationError
from contextlens.judges.formats import compact_instructions
from contextlens.judges.schema import field_line
from contextlens.metrics.base import DataBlocks, data_block
from contextlens.metrics.contextual_relevancy import (
    ContextualRelevancyScorer,
    relevancy_messages,
    reply_schema,
)
from contextlens.metrics.registry import key_of
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support.relevancy import (
    FORMAT_OVERRIDE,
    REASON_ASKED,
    REFUND,
    SHIPPING,
    RuleJudge,
    case,
    facts,
    fenced,
    rule_reply,
    server_reply,
    verdict_reply,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "contextual_relevancy_deepeval.py"


# --- measure and its attributes -------------------------------------------------------------


def test_measure_sets_score_reason_success_and_verdicts():
    model = FakeListChatModel(
        responses=[verdict_reply("yes", "no", "yes", "no", "yes", reason="All relevant!")]
    )
    metric = ContextualRelevancyMetric(model=model)
    assert isinstance(metric.metric, ContextualRelevancyScorer)
    assert metric.measure(case(facts(5))) == pytest.approx(0.6)
    assert metric.score == pytest.approx(0.6) and metric.success and metric.is_successful()
    assert metric.reason == "3 of 5 statements are relevant. All relevant!"
    assert [v["verdict"] for v in metric.verdicts] == ["yes", "no", "yes", "no", "yes"]
    assert set(metric.verdicts[0]) == {"chunk", "statement", "verdict", "reason"}
    assert metric.error is None and metric.evaluation_cost is None
    assert metric.result.score == metric.score and metric.result.reason == metric.reason


def test_threshold_decides_success():
    model = FakeListChatModel(responses=[verdict_reply("yes", "no", "yes", "no", "yes")])
    metric = ContextualRelevancyMetric(threshold=0.7, model=model)
    assert metric.measure(case(facts(5))) == pytest.approx(0.6)
    assert metric.success is False and not metric.is_successful()


def test_strict_mode_sets_the_threshold_to_one():
    model = FakeListChatModel(responses=[verdict_reply("yes", "yes", "no")])
    metric = ContextualRelevancyMetric(threshold=0.2, model=model, strict_mode=True)
    assert metric.threshold == 1.0 and metric.strict_mode
    assert metric.measure(case(facts(3))) == 0.0 and metric.success is False


def test_missing_retrieval_context_raises_naming_the_field():
    metric = ContextualRelevancyMetric(model=RuleJudge())
    with pytest.raises(ValueError, match="retrieval_context") as info:
        metric.measure(case(None))
    assert isinstance(info.value, InputError) and info.value.field == "retrieval_context"
    assert metric.score is None and metric.success is False and metric.error
    with pytest.raises(InputError, match="input"):
        metric.measure(case("a", question="  "))


def test_two_bad_replies_raise_metric_computation_error_with_the_reason():
    model = FakeListChatModel(responses=["not json", "still not json"])
    metric = ContextualRelevancyMetric(model=model)
    with pytest.raises(MetricComputationError, match="no JSON object"):
        metric.measure(case(REFUND))
    assert metric.score is None and metric.success is False and not metric.is_successful()
    assert "no JSON object" in metric.error


def test_one_judge_call_per_test_case_with_usage_in_details_and_repeats_cached():
    chunks = (REFUND, SHIPPING, "Refund requests take 5 days.", "Hello.")
    questions = [f"What if these shoes don't fit (pair {i})?" for i in range(3)]
    with FakeOpenAIServer(reply=server_reply) as server:
        metric = ContextualRelevancyMetric(model=f"{server.base_url}#judge")
        scores = [metric.measure(case(*chunks, question=q)) for q in questions]
        assert server.calls == 3
        usage = metric.result.details.usage
        assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
        assert metric.evaluation_cost is None and metric.result.details.judge_calls == 1
        # the shell caches by default: the same case again is answered without a call
        assert metric.measure(case(*chunks, question=questions[0])) == scores[0]
        assert server.calls == 3
    assert scores == [0.5, 0.5, 0.5]


def test_include_reason_false_leaves_reason_none():
    with FakeOpenAIServer(reply=server_reply) as server:
        metric = ContextualRelevancyMetric(model=f"{server.base_url}#judge", include_reason=False)
        assert metric.measure(case(REFUND, SHIPPING)) == 0.5
        system = server.requests[0]["messages"][0]["content"]
    assert metric.reason is None and REASON_ASKED not in system
    assert metric.include_reason is False


# --- evaluation_template: DeepEval's template classes -------------------------------------


class DeepEvalTemplate:
    """DeepEval's documented custom template: a static ``generate_verdicts`` only."""

    @staticmethod
    def generate_verdicts(input: str, context: str) -> str:
        return (
            "Based on the input and context, please generate a JSON object to indicate "
            "whether each statement found in the context is relevant to the provided input.\n"
            'Example JSON:\n{"verdicts": [{"verdict": "yes", "statement": "..."}]}\n**\n\n'
            f"Input:\n{input}\n\nContext:\n{context}\n\nJSON:\n"
        )


def test_a_deepeval_template_class_builds_the_judge_prompt():
    with FakeOpenAIServer(reply=server_reply) as server:
        metric = ContextualRelevancyMetric(
            model=f"{server.base_url}#judge", evaluation_template=DeepEvalTemplate
        )
        assert metric.measure(case(REFUND, SHIPPING)) == 0.5
        assert server.calls == 1
        [only] = server.requests[0]["messages"]
        schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    q = "What if these shoes don't fit?"
    mark = DataBlocks(q, f"[1] {REFUND}", f"[2] {SHIPPING}").mark
    text = DeepEvalTemplate.generate_verdicts(
        input=f"<input_{mark}>\n{q}\n</input_{mark}>",
        context=f"Chunk 1:\n<chunk_{mark}>\n[1] {REFUND}\n</chunk_{mark}>\n\n"
        f"Chunk 2:\n<chunk_{mark}>\n[2] {SHIPPING}\n</chunk_{mark}>",
    )
    # the template's text, then ours: the reply format it must be answered in
    assert only["role"] == "user" and only["content"].startswith(text + "\n\n" + FORMAT_OVERRIDE)
    # the server enforces the schema, so the prompt names its fields in one line
    assert only["content"].endswith(
        "(the reply format is enforced): " + field_line(reply_schema([REFUND, SHIPPING], True))
    )
    assert "reason" in schema["required"]
    # the score is computed from the verdicts of that reply
    assert [(v["chunk"], v["verdict"]) for v in metric.verdicts] == [(0, "yes"), (1, "no")]
    assert metric.reason == "1 of 2 statements are relevant. judge says so"
    assert metric.evaluation_template is DeepEvalTemplate


def test_a_template_with_its_own_generate_reason_asks_for_the_reason_in_a_second_call(
    rule_model,
):
    class WithReason(ContextualRelevancyTemplate):
        @staticmethod
        def generate_verdicts(input: str, context: str) -> str:
            return f"VERDICTS PLEASE\n{input}\n{context}"

        @staticmethod
        def generate_reason(input, irrelevancies, relevant_statements, score):
            return (
                f"REASON PLEASE for {score}\n{input}\nirrelevant: {irrelevancies}\n"
                f"relevant: {relevant_statements}"
            )

    prompts: list[str] = []

    def answer(prompt: str) -> str:
        prompts.append(prompt)
        if prompt.startswith("REASON PLEASE"):
            return fenced({"reason": "the template's own reason"})
        return fenced(rule_reply(prompt, with_reason=REASON_ASKED in prompt))

    model = rule_model(answer)
    metric = ContextualRelevancyMetric(model=model, evaluation_template=WithReason)
    assert metric.measure(case(REFUND, SHIPPING)) == 0.5
    assert model.calls == 2 and metric.result.details.judge_calls == 2
    verdicts_prompt, reason_prompt = prompts
    assert verdicts_prompt.startswith("VERDICTS PLEASE\n<input_")
    assert REASON_ASKED not in verdicts_prompt  # the reason is not asked with the verdicts
    expected = WithReason.generate_reason(
        input=data_block("input", "What if these shoes don't fit?"),
        irrelevancies=["off topic"],
        relevant_statements=[REFUND],
        score=0.5,
    )
    assert reason_prompt.startswith(expected + "\n\n" + FORMAT_OVERRIDE)
    assert metric.reason == "1 of 2 statements are relevant. the template's own reason"

    # without a reason asked for, there is no second call
    model = rule_model(answer)
    metric = ContextualRelevancyMetric(
        model=model, evaluation_template=WithReason, include_reason=False
    )
    assert metric.measure(case(REFUND, SHIPPING, question="And if they are too big?")) == 0.5
    assert model.calls == 1 and metric.reason is None


def test_a_template_subclass_that_overrides_nothing_uses_the_default_prompts():
    class Unchanged(ContextualRelevancyTemplate):
        pass

    with FakeOpenAIServer(reply=server_reply) as server:
        metric = ContextualRelevancyMetric(
            model=f"{server.base_url}#judge", evaluation_template=Unchanged
        )
        assert metric.measure(case(REFUND, SHIPPING)) == 0.5
        assert server.calls == 1
        sent = server.requests[0]["messages"]
    default = compact_instructions(
        relevancy_messages(case().input, [REFUND, SHIPPING]), reply_schema([REFUND, SHIPPING], True)
    )
    assert [(m["role"], m["content"]) for m in sent] == [(m["role"], m["content"]) for m in default]
    assert metric.reason == "1 of 2 statements are relevant. judge says so"


def test_offline_a_given_template_is_reported_unused():
    metric = ContextualRelevancyMetric(evaluation_template=DeepEvalTemplate)
    with pytest.warns(UserWarning, match="evaluation_template .* is unused offline"):
        score = metric.measure(case(REFUND))
    assert 0.0 <= score <= 1.0 and metric.result.details.method == "offline"
    assert metric.result.details.template.startswith("unused")


def test_evaluation_template_that_is_no_template_is_refused():
    with pytest.raises(TypeError, match="evaluation_template"):
        ContextualRelevancyMetric(evaluation_template=42)


# --- sync, async ----------------------------------------------------------------------------


async def test_sync_measure_inside_a_running_loop_and_a_measure():
    judge = RuleJudge()
    metric = ContextualRelevancyMetric(model=judge)
    assert metric.measure(case(REFUND, SHIPPING)) == 0.5  # sync call inside this test's loop
    assert await metric.a_measure(case(REFUND)) == 1.0
    assert metric.score == 1.0 and judge.calls == 2


def test_a_measure_from_plain_asyncio_run():
    metric = ContextualRelevancyMetric(model=RuleJudge())
    assert asyncio.run(metric.a_measure(case(SHIPPING))) == 0.0


# --- DeepEval's names, verbose mode, offline --------------------------------------------------


def test_deepeval_names_and_verbose_mode_prints_to_stderr_for_that_measure_only(capsys):
    quiet = ContextualRelevancyMetric(model=RuleJudge())
    loud = ContextualRelevancyMetric(model=RuleJudge(), verbose_mode=True)
    assert loud.__name__ == "Contextual Relevancy" and loud.evaluation_model == "rule"
    quiet.measure(case(REFUND, SHIPPING))
    assert capsys.readouterr() == ("", "")
    assert "Verdicts:" in quiet.verbose_logs  # kept, not printed
    loud.measure(case(REFUND, SHIPPING))
    out, err = capsys.readouterr()
    assert out == ""
    assert "Verdicts:" in loud.verbose_logs and "Shipping is free" in loud.verbose_logs
    assert err == f"Contextual Relevancy (rule)\n{loud.verbose_logs}\n"
    quiet.measure(case(SHIPPING))
    assert capsys.readouterr() == ("", "")


def test_offline_scores_a_relevant_chunk_above_an_off_topic_one():
    metric = ContextualRelevancyMetric()
    question = "What is the return policy for unused items?"
    on_topic = metric.measure(
        case("Unused items can be returned within 30 days for a full refund.", question=question)
    )
    off_topic = metric.measure(
        case("The Eiffel Tower was completed in 1889 in Paris.", question=question)
    )
    assert on_topic > off_topic
    assert metric.evaluation_model == "offline" and metric.evaluation_cost is None
    assert metric.result.details.method == "offline"
    assert "template" not in metric.result.details
    assert metric.reason.startswith("0 of 1 statement is relevant.")
    assert metric.verdicts[0]["verdict"] == "no" and 0 <= metric.verdicts[0]["relevance"] < 0.5


def test_example_runs_offline():
    assert contextlens.ContextualRelevancyMetric is ContextualRelevancyMetric
    # no judge (offline); the test's own cache folder (conftest) is kept
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENAI") and k != "CONTEXTLENS_JUDGE"
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    score, reason = out.stdout.strip().splitlines()[-2:]
    assert 0.0 <= float(score) <= 1.0 and "statement" in reason


# --- DeepEval's and agensight's own surface ---------------------------------------------------


def test_llm_test_case_takes_deepevals_fields_and_keeps_them_unread():
    assert contextlens.LLMTestCase is ModelTestCase
    tool = object()  # an expected tool: kept as it is

    class DeepEvalToolCall:  # DeepEval's ToolCall fields, read into a ToolCall
        def __init__(self) -> None:
            self.name = "refunds"
            self.description = "the refund policy"
            self.input_parameters = {"item": "shoes"}
            self.output = "30-day full refund"

    test_case = contextlens.LLMTestCase(
        input="What if these shoes don't fit?",
        expected_output="We offer a 30-day full refund at no extra cost.",
        actual_output="We offer a 30-day full refund at no extra cost.",
        retrieval_context=[REFUND],
        context=[REFUND],
        tools_called=[DeepEvalToolCall()],
        expected_tools=[tool],
        metadata={"source": "faq"},
        tags=["refunds"],
        token_cost=0.002,
        completion_time=1.5,
        flaky=False,
        comments="from the FAQ",
        name="refund",
    )
    assert test_case.multimodal is False
    [called] = test_case.tools_called
    assert (called.name, called.input, called.output) == (
        "refunds",
        {"item": "shoes"},
        "30-day full refund",
    )
    assert test_case.expected_tools == [tool] and test_case.meta == {"source": "faq"}
    model = FakeListChatModel(responses=[verdict_reply("yes")])
    assert ContextualRelevancyMetric(model=model, async_mode=False).measure(test_case) == 1.0
    with pytest.raises(ValueError, match="did you mean 'tools_called'"):
        contextlens.LLMTestCase(input="q", tool_called=[])


def test_a_text_holding_an_image_placeholder_makes_the_case_multimodal():
    image = "[DEEPEVAL:IMAGE:0b7e2a]"  # what f"{MLLMImage(...)}" writes
    assert ModelTestCase(input=f"What's shown in this image? {image}").multimodal is True
    assert ModelTestCase(input="q", retrieval_context=[f"Cars {image}"]).multimodal is True
    assert ModelTestCase(input="q", context=["[DEEPEVAL:PDF:1]"]).multimodal is True
    assert ModelTestCase(input="q", multimodal=True).multimodal is True
    assert ModelTestCase(input="a [DEEPEVAL:AUDIO:1]").multimodal is False


def test_verdicts_list_holds_one_verdicts_object_per_chunk():
    model = FakeListChatModel(responses=[verdict_reply("yes", "no", "no", reason="r")])
    metric = ContextualRelevancyMetric(model=model)
    metric.measure(case(facts(2), "   ", SHIPPING))  # the blank chunk is not sent
    assert [len(v.verdicts) for v in metric.verdicts_list] == [2, 0, 1]
    first, second = metric.verdicts_list[0].verdicts
    assert (first.statement, first.verdict) == ("Fact one is here.", "yes")
    assert (second.statement, second.verdict, second.reason) == ("Fact two is here.", "no", "x")
    assert metric.verdicts_list[2].verdicts[0].statement == SHIPPING


@pytest.mark.parametrize("spelling", ["irrelevant_statements", "irrelevancies", "positional"])
def test_generate_reason_gets_the_irrelevant_statements_under_its_own_name(spelling, rule_model):
    seen: dict[str, object] = {}

    def reason(input, irrelevant, relevant_statements, score):
        seen.update(irrelevant=irrelevant, relevant=relevant_statements, score=score)
        return f"REASON PLEASE for {score}"

    if spelling == "irrelevant_statements":

        def generate_reason(input, irrelevant_statements, relevant_statements, score):
            return reason(input, irrelevant_statements, relevant_statements, score)
    elif spelling == "irrelevancies":

        def generate_reason(input, irrelevancies, relevant_statements, score):
            return reason(input, irrelevancies, relevant_statements, score)
    else:

        def generate_reason(question, bad, good, value, /):
            return reason(question, bad, good, value)

    class Template(ContextualRelevancyTemplate):
        pass

    Template.generate_reason = staticmethod(generate_reason)

    def answer(prompt: str) -> str:
        if prompt.startswith("REASON PLEASE"):
            return fenced({"reason": "the template's reason"})
        return fenced(rule_reply(prompt, with_reason=REASON_ASKED in prompt))

    metric = ContextualRelevancyMetric(model=rule_model(answer), evaluation_template=Template)
    assert metric.measure(case(REFUND, SHIPPING)) == 0.5
    assert seen == {"irrelevant": ["off topic"], "relevant": [REFUND], "score": 0.5}
    assert metric.reason == "1 of 2 statements are relevant. the template's reason"


def test_a_template_taking_multimodal_is_given_the_text_only_prompt(rule_model):
    class Template:
        @staticmethod
        def generate_verdicts(input, context, multimodal):
            assert multimodal is False
            return f"VERDICTS\n{input}\n{context}"

    metric = ContextualRelevancyMetric(
        model=rule_model(lambda p: fenced(rule_reply(p))), evaluation_template=Template
    )
    assert metric.measure(case(REFUND, SHIPPING)) == 0.5


def test_agensights_name_and_retrieval_context_arguments():
    model = FakeListChatModel(responses=[verdict_reply("yes", "no")])
    metric = ContextualRelevancyMetric(
        threshold=0.7, model=model, name="faq relevancy", retrieval_context=[REFUND, SHIPPING]
    )
    assert metric.name == "faq relevancy"
    assert key_of(metric.metric) == "contextual-relevancy:faq relevancy"
    # the metric's chunks are judged, whatever the test case brings
    assert metric.measure(ModelTestCase(input="What if these shoes don't fit?")) == 0.5
    assert [len(v.verdicts) for v in metric.verdicts_list] == [1, 1]
    assert ContextualRelevancyMetric().name == "contextual-relevancy"


# --- verdict tokens (DeepEval #3079, PRs #3080 / #3082) --------------------------------------


@pytest.mark.parametrize("async_mode", [True, False])
def test_an_unconstrained_judges_verdict_tokens_are_normalised(async_mode):
    # a model without structured output: its verdicts are read as DeepEval reads them
    tokens = ["Yes", "yes.", " NO ", "yes ", "No, off topic", "YES!"]
    model = FakeListChatModel(responses=[verdict_reply(*tokens)])
    metric = ContextualRelevancyMetric(model=model, async_mode=async_mode)
    assert metric.measure(case(facts(6))) == pytest.approx(4 / 6)
    assert [v["verdict"] for v in metric.verdicts] == ["yes", "yes", "no", "yes", "no", "yes"]
    assert metric.result.details.attempts == 1  # taken at once: no re-ask
    assert metric.reason.startswith("4 of 6 statements are relevant.")


def test_a_verdict_that_is_neither_word_is_re_asked_then_fails():
    model = FakeListChatModel(responses=[verdict_reply("maybe"), verdict_reply("perhaps")])
    with pytest.raises(MetricComputationError, match="verdict"):
        ContextualRelevancyMetric(model=model).measure(case(REFUND))


def test_a_constrained_reply_stays_strict():
    def reply(request: dict) -> str:
        said = "Yes" if len(request["messages"]) == 2 else "yes"  # "yes" after the re-ask
        return json.dumps({"verdicts": [said], "irrelevant": [], "reason": "r"})

    with FakeOpenAIServer(reply=reply) as server:
        strict = ContextualRelevancyMetric(model=f"{server.base_url}#judge")
        assert strict.measure(case(REFUND)) == 1.0
        assert strict.result.details.attempts == 2  # "Yes" from a constrained reply: re-asked
        assert server.requests[0]["response_format"]["type"] == "json_schema"
        lenient = ContextualRelevancyMetric(model=f"{server.base_url}#other?structured=off")
        assert lenient.measure(case(REFUND)) == 1.0
        assert lenient.result.details.attempts == 1
        assert "response_format" not in server.requests[-1]


def test_a_generate_reason_that_names_only_some_variables_gets_those(rule_model):
    """A reason prompt written for what it needs: DeepEval users override
    ``generate_reason(input, score)`` alone; it is called with those two and no others."""
    seen: dict[str, object] = {}

    class Template(ContextualRelevancyTemplate):
        @staticmethod
        def generate_reason(input, score):
            seen.update(input=input, score=score)
            return f"REASON PLEASE for {score}"

    def answer(prompt: str) -> str:
        if prompt.startswith("REASON PLEASE"):
            return fenced({"reason": "short and sweet"})
        return fenced(rule_reply(prompt, with_reason=REASON_ASKED in prompt))

    metric = ContextualRelevancyMetric(model=rule_model(answer), evaluation_template=Template)
    assert metric.measure(case(REFUND, SHIPPING)) == 0.5
    assert set(seen) == {"input", "score"} and seen["score"] == 0.5
    assert "input_" in str(seen["input"])  # the input as its data block
    assert metric.reason == "1 of 2 statements are relevant. short and sweet"
