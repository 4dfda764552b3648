"""gaussia's instance API and its data shapes: ``Context(retriever, model, ...)`` with
``batch``, ``on_process_complete`` and ``metrics``; sessions given in parts folded into one;
``IterationLevel``, ``StreamedBatch`` and ``SessionMetadata``; the shapes gaussia accepts
(``language=None``, ``logprobs=None``, an empty conversation)."""

import math

import pytest

from contextlens import (
    Batch,
    BayesianMode,
    Context,
    ContextMetric,
    Dataset,
    FrequentistMode,
    InputError,
    IterationLevel,
    Retriever,
    SessionMetadata,
    StreamedBatch,
    evaluate,
)
from support import block_of, blocks
from support.context import CONTEXT, make_session, verdict


class SampleRetriever(Retriever):
    """The sessions given as ``sessions=``, else one sample session."""

    def load_dataset(self):
        return self.kwargs.get("sessions", [make_session()])


def interaction(qa_id: str, **fields) -> Batch:
    return Batch(
        qa_id=qa_id,
        query=fields.pop("query", "What is artificial intelligence?"),
        assistant=fields.pop(
            "assistant", "AI is the simulation of human intelligence by machines."
        ),
        ground_truth_assistant=fields.pop(
            "ground_truth_assistant", "AI simulates human intelligence processes."
        ),
        **fields,
    )


@pytest.fixture
def judge(rule_model):
    """A judge that gives every interaction 0.85 and keeps the prompts it was sent."""
    prompts: list[str] = []

    def rule(prompt: str) -> str:
        prompts.append(prompt)
        return verdict(0.85, "Good context awareness")

    model = rule_model(rule)
    model.__dict__["prompts"] = prompts
    return model


# -- construction -----------------------------------------------------------------------------


def test_the_instance_keeps_what_it_was_given(judge):
    context = Context(retriever=SampleRetriever, model=judge)
    assert context.model is judge
    assert isinstance(context.statistical_mode, FrequentistMode)
    assert context.bos_json_clause == "```json" and context.eos_json_clause == "```"
    assert context.use_structured_output is None and context.strict is True
    assert context.metrics == [] and context.verbose is False
    custom = Context(
        retriever=SampleRetriever,
        model=judge,
        use_structured_output=True,
        bos_json_clause="<json>",
        eos_json_clause="</json>",
        statistical_mode=BayesianMode(mc_samples=100),
    )
    assert custom.use_structured_output is True
    assert (custom.bos_json_clause, custom.eos_json_clause) == ("<json>", "</json>")
    assert isinstance(custom.statistical_mode, BayesianMode)
    assert custom.metric.config.fence.bos == "<json>"  # the core judges with the same clauses


# -- batch and on_process_complete ---------------------------------------------------------------


def test_batch_then_on_process_complete_gives_one_metric_per_session(judge):
    context = Context(retriever=SampleRetriever, model=judge)
    context.batch(
        session_id="test_session",
        context="Healthcare AI context",
        assistant_id="test_assistant",
        batch=[interaction("qa_001"), interaction("qa_002")],
    )
    assert context.metrics == []  # scored when the process completes
    context.on_process_complete()
    [metric] = context.metrics
    assert isinstance(metric, ContextMetric)
    assert (metric.session_id, metric.assistant_id) == ("test_session", "test_assistant")
    assert metric.n_interactions == 2 and metric.n_failed == 0
    assert metric.context_awareness == pytest.approx(0.85)
    assert metric.context_awareness_ci_low is None and metric.context_awareness_ci_high is None
    assert [i.qa_id for i in metric.interactions] == ["qa_001", "qa_002"]
    assert metric.interactions[0].context_awareness == pytest.approx(0.85)
    assert metric.interactions[0].reason == "Good context awareness"


def test_batches_of_one_session_accumulate_and_other_sessions_stay_apart(judge):
    context = Context(retriever=SampleRetriever, model=judge)
    context.batch(session_id="s1", context="c", assistant_id="a", batch=[interaction("q1")])
    context.batch(session_id="s1", context="c", assistant_id="a", batch=[interaction("q2")])
    context.batch(session_id="s2", context="c", assistant_id="a", batch=[interaction("q3")])
    context.on_process_complete()
    assert [(m.session_id, m.n_interactions) for m in context.metrics] == [("s1", 2), ("s2", 1)]
    with pytest.raises(InputError, match="duplicate qa_id 'q1' in session 's3'"):
        context.batch(session_id="s3", context="c", assistant_id="a", batch=[interaction("q1")])
        context.batch(session_id="s3", context="c", assistant_id="a", batch=[interaction("q1")])
    with pytest.raises(InputError, match="field 'context'"):
        context.batch(session_id="s4", context="c", assistant_id="a", batch=[interaction("q1")])
        context.batch(session_id="s4", context="other", assistant_id="a", batch=[])


def test_the_observation_reaches_the_judge_when_there_is_one(judge):
    context = Context(retriever=SampleRetriever, model=judge)
    context.batch(
        session_id="s",
        context="Test context",
        assistant_id="a",
        batch=[
            interaction("with", observation="The user seems confused"),
            interaction("without", ground_truth_assistant="THE REFERENCE REPLY"),
        ],
    )
    context.on_process_complete()
    with_observation, without = sorted(judge.prompts, key=lambda p: "observation_" not in p)
    assert block_of(with_observation, "observation") == "The user seems confused"
    assert not blocks(without, "observation")
    assert block_of(without, "reference_reply") == "THE REFERENCE REPLY"
    assert block_of(without, "assistant_reply") != "THE REFERENCE REPLY"


def test_an_interaction_without_a_valid_verdict_is_nan_with_its_reason(rule_model):
    context = Context(retriever=SampleRetriever, model=rule_model(lambda p: "Some thinking"))
    context.batch(session_id="s", context="c", assistant_id="a", batch=[interaction("qa_001")])
    context.on_process_complete()
    [metric] = context.metrics
    [failed] = metric.interactions
    assert math.isnan(failed.context_awareness) and failed.failed
    assert "no JSON object" in failed.error and metric.n_failed == 1


def test_use_structured_output_reaches_the_judge(rule_model):
    model = rule_model(lambda p: verdict(0.85))
    for setting, expected in ((True, True), (False, False), (None, True)):
        context = Context(retriever=SampleRetriever, model=model, use_structured_output=setting)
        assert context.metric.judge.use_structured_output is expected


def test_verbose_writes_each_session_when_the_process_completes(judge, capsys):
    context = Context(retriever=SampleRetriever, model=judge, verbose=True)
    context.batch(session_id="s", context="c", assistant_id="a", batch=[interaction("qa_001")])
    assert capsys.readouterr().err == ""
    context.on_process_complete()
    err = capsys.readouterr().err
    assert "session s (langchain:" in err and "qa_001: 0.85  Good context awareness" in err
    assert len(context.metrics) == 1


def test_the_bayesian_mode_gives_an_interval_around_the_mean(rule_model):
    scores = iter([0.9, 0.6, 0.75])
    context = Context(
        retriever=SampleRetriever,
        model=rule_model(lambda p: verdict(next(scores))),
        statistical_mode=BayesianMode(mc_samples=200, rng_seed=42),
    )
    context.batch(
        session_id="s",
        context="c",
        assistant_id="a",
        batch=[interaction(f"q{i}", query=f"question {i}") for i in range(3)],
    )
    context.on_process_complete()
    [metric] = context.metrics
    assert metric.context_awareness_ci_low is not None
    assert (
        metric.context_awareness_ci_low
        <= metric.context_awareness
        <= metric.context_awareness_ci_high
    )


def test_run_returns_the_metrics_of_every_session_the_retriever_loads(judge):
    metrics = Context.run(SampleRetriever, model=judge, verbose=False)
    assert [m.session_id for m in metrics] == ["s1"]
    assert all(isinstance(m, ContextMetric) for m in metrics)
    instance = Context(SampleRetriever, model=judge)
    assert instance.dataset is not None  # loaded when made, as gaussia does
    assert instance.retriever.kwargs == {}


# -- sessions in parts, streamed batches ---------------------------------------------------------


def test_a_session_split_over_several_datasets_is_one_result(judge):
    whole = make_session("split")
    first = whole.model_copy(update={"conversation": whole.conversation[:2]})
    second = whole.model_copy(update={"conversation": whole.conversation[2:]})
    other = make_session("other")
    metrics = Context.run(SampleRetriever, model=judge, sessions=[first, other, second])
    assert [(m.session_id, m.n_interactions) for m in metrics] == [("split", 3), ("other", 3)]
    assert [i.qa_id for i in metrics[0].interactions] == ["hours", "delivery", "monday"]
    clash = second.model_copy(update={"context": "another context"})
    with pytest.raises(InputError, match="session 'split': differs"):
        Context.run(SampleRetriever, model=judge, sessions=[first, clash])


class StreamingRetriever(Retriever):
    """gaussia's stream-batches retriever: one interaction at a time, lazily."""

    @property
    def iteration_level(self) -> IterationLevel:
        return IterationLevel.STREAM_BATCHES

    def load_dataset(self):
        for session in (make_session("a"), make_session("b")):
            meta = SessionMetadata(
                session_id=session.session_id,
                assistant_id=session.assistant_id,
                language=session.language,
                context=session.context,
            )
            for turn in session.conversation:
                yield StreamedBatch(metadata=meta, batch=turn)


def test_streamed_batches_are_gathered_into_their_sessions(judge):
    assert Retriever.iteration_level.fget(SampleRetriever()) is IterationLevel.FULL_DATASET
    metrics = Context.run(StreamingRetriever, model=judge)
    assert [(m.session_id, m.n_interactions) for m in metrics] == [("a", 3), ("b", 3)]
    assert all(m.context_awareness == pytest.approx(0.85) for m in metrics)
    assert IterationLevel("stream_sessions") is IterationLevel.STREAM_SESSIONS
    with pytest.raises(ValueError, match="did you mean 'session_id'"):
        SessionMetadata(sesion_id="x", assistant_id="a", context="c")


# -- the shapes gaussia accepts ---------------------------------------------------------------


def test_gaussias_optional_fields_take_none():
    session = Dataset(
        session_id="s",
        assistant_id="a",
        language=None,
        context=CONTEXT,
        conversation=[
            Batch(
                qa_id="q",
                query="When are you open?",
                assistant="Tuesday to Sunday.",
                ground_truth_assistant="Tuesday to Sunday, noon to 10pm.",
                logprobs=None,
                agentic=None,
                ground_truth_agentic=None,
            )
        ],
    )
    assert session.language is None and session.conversation[0].logprobs is None
    [metric] = Context.run(SampleRetriever, sessions=[session])
    assert metric.n_failed == 0 and 0.0 <= metric.context_awareness <= 1.0
    assert BayesianMode(mc_samples=50).mc_samples == 50


def test_a_session_without_interactions_has_no_score_and_says_so():
    empty = Dataset(session_id="empty", assistant_id="a", context="c", conversation=[])
    [metric] = Context.run(SampleRetriever, sessions=[empty])
    assert metric.n_interactions == 0 and math.isnan(metric.context_awareness)
    run = evaluate([empty, make_session()], [Context()], progress=False, keep_results=True)
    failed = run.failures()
    assert [f.case_id for f in failed] == ["empty"]
    assert "no interactions" in failed[0].error
    assert run.summaries["context"].n_scored == 1
