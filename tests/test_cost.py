"""Cost known before the run and capped during it: ``--dry-run`` / ``dry_run=True`` makes no
call and estimates what the run then spends on the fake server; ``--max-cost`` /
``max_cost=`` never lets a run spend past its cap, and what it did not run is "not run"."""

from __future__ import annotations

import csv
import importlib
import json
import math
import xml.etree.ElementTree as ET

import pytest

from contextlens import ModelTestCase, evaluate
from contextlens.backend import Usage
from contextlens.compat.deepeval_template import ContextualRelevancyTemplate, relevancy_prompt
from contextlens.engine.accounting import PRICES
from contextlens.engine.budget import CostCap, CostCapReached
from contextlens.engine.tokens import CHARS, counter_for
from contextlens.judges.sizing import call_size, shortest_reply
from contextlens.metrics.context import ContextVerdict
from contextlens.metrics.context_precision import PrecisionVerdict
from contextlens.metrics.contextual_relevancy import (
    ContextualRelevancyScorer,
    reply_schema,
)
from contextlens.results import EvalRun
from contextlens.testing import FakeOpenAIServer
from support.context import make_session
from support.rag import rule_reply as claims_reply
from support.relevancy import REFUND, SHIPPING, facts, rule_reply

MODEL = "cost-test-judge"  # unknown to any tokenizer: counted as characters / 4, as the server
PRICE = (0.15, 0.60)  # gpt-4o-mini's, USD per million tokens


@pytest.fixture(autouse=True)
def _priced():
    PRICES.register(MODEL, *PRICE)
    yield
    PRICES._prices.pop(MODEL, None)


def reply(request: dict) -> str:
    """A judge that answers every metric as a model would, at the length its prompt asks
    for: relevancy by the refund rule, the others 0.7 with a sentence or two of reason."""
    user = request["messages"][-1]["content"]
    if "[1] " in user:
        return json.dumps(rule_reply(user, reason=WHY))
    return json.dumps({"reason": WHY, "score": 0.7})


def every_reply(request: dict) -> str:
    """:func:`reply`, with the claims and ranked verdicts of faithfulness, context recall and
    ranked context precision."""
    asked = json.dumps(request.get("response_format") or {}) + request["messages"][0]["content"]
    if "[1] " not in request["messages"][-1]["content"] and (
        '"claims"' in asked or '"verdicts"' in asked
    ):
        return claims_reply(request)
    return reply(request)


JUDGED = [
    "contextual-relevancy",
    "context-precision",
    "context-precision-ranked",
    "context-recall",
    "faithfulness",
]


WHY = (
    "The answer follows the context on the refund window and the free shipping, but it "
    "adds a detail about exchanges that the context does not state anywhere."
)


def rag_cases(n: int) -> list[ModelTestCase]:
    return [
        ModelTestCase(
            name=f"c{i}",
            input=f"What if these shoes don't fit (pair {i})?",
            actual_output="We refund within 30 days.",
            expected_output="A full refund within 30 days.",
            retrieval_context=[REFUND, SHIPPING, facts(i % 4 + 1)],
        )
        for i in range(n)
    ]


def spent(server: FakeOpenAIServer) -> float:
    """What the server's own token counts cost at the judge's price."""
    return (server.prompt_tokens * PRICE[0] + server.completion_tokens * PRICE[1]) / 1e6


# --- the dry run ----------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["contextual-relevancy", "context-precision", "context"])
def test_a_dry_run_makes_no_call_and_is_within_20_percent_of_the_real_spend(metric):
    cases = [make_session(f"s{i}") for i in range(12)] if metric == "context" else rag_cases(30)
    with FakeOpenAIServer(reply=reply) as server:
        judge = f"{server.base_url}#{MODEL}"
        estimate = evaluate(cases, [metric], judge=judge, cache=False, dry_run=True)
        assert server.calls == 0
        run = evaluate(cases, [metric], judge=judge, cache=False, progress=False)
        real = spent(server)
        calls = server.calls
    [row] = estimate.metrics
    assert row.calls == calls and run.summaries[metric].n_failed == 0
    assert row.prompt_tokens == server.prompt_tokens  # the same prompts, the same counting
    assert row.completion_low <= server.completion_tokens <= row.completion_high
    assert row.cost_low <= real <= row.cost_high
    assert abs(row.cost - real) <= 0.2 * real, (row.cost, real)
    assert row.cost == estimate.cost and row.tokenizer == CHARS.name


def test_a_dry_run_counts_what_the_cache_answers_as_free(tmp_path):
    cases = rag_cases(10)
    cache = tmp_path / "cache.sqlite3"
    with FakeOpenAIServer(reply=reply) as server:
        judge = f"{server.base_url}#{MODEL}"
        evaluate(cases[:6], ["contextual-relevancy"], judge=judge, cache=cache, progress=False)
        before = server.calls
        estimate = evaluate(cases, ["contextual-relevancy"], judge=judge, cache=cache, dry_run=True)
        assert server.calls == before
    [row] = estimate.metrics
    assert (row.calls, row.cache_hits) == (4, 6)


class LooseModel:
    """A DeepEval-shaped model whose text replies no grammar constrains: ``"Yes."`` for yes."""

    def get_model_name(self) -> str:
        return MODEL

    def generate(self, prompt: str, schema=None) -> str:
        if "verdicts" not in schema.model_fields:  # a template's own reason call
            return json.dumps({"reason": WHY})
        data = rule_reply(prompt, reason=WHY)
        data["verdicts"] = [f"{v.capitalize()}." for v in data["verdicts"]]
        return json.dumps(data)


class WithReason(ContextualRelevancyTemplate):
    """A template with its own reason prompt: asked only once the verdicts were read."""

    @staticmethod
    def generate_reason(input, irrelevant_statements, relevant_statements, score):
        return f"Say why the context scores {score}."


def test_a_dry_run_reads_a_cached_reply_as_its_judge_reads_it(tmp_path):
    cases, cache = rag_cases(4), tmp_path / "cache.sqlite3"
    metric = ContextualRelevancyScorer(prompt=relevancy_prompt(WithReason))
    run = evaluate(cases, [metric], judge=LooseModel(), cache=cache)
    assert run.summaries["contextual-relevancy"].n_scored == 4  # "Yes." read as "yes"
    estimate = evaluate(cases, [metric], judge=LooseModel(), cache=cache, dry_run=True)
    [row] = estimate.metrics
    assert (row.calls, row.cache_hits) == (0, 8)  # the verdicts read again, so the reasons asked


def test_a_dry_run_needs_no_key_and_writes_nothing(run_cli, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(c.model_dump_json() for c in rag_cases(5)) + "\n")
    code, text = run_cli("run", data, "-m", "contextual-relevancy", "-m", "context-similarity",
                         "--judge", "openai:gpt-4o-mini", "--dry-run")  # fmt: skip
    assert code == 0, text
    assert "contextlens dry run" in text and "no judge call made" in text
    assert "gpt-4o-mini" in text and "$0 (no judge)" in text
    assert not (tmp_path / "contextlens-out").exists()
    if counter_for("gpt-4o-mini") is not CHARS:  # tiktoken and its file are here
        assert "tiktoken o200k_base" in text


def test_a_dry_run_prompt_is_the_one_the_backend_sends():
    """Where the server enforces the schema the prompt names the fields and the schema is
    counted once, as the response format; with the prompt alone the schema is in it."""
    from contextlens.judges import OpenAICompatBackend
    from contextlens.metrics.contextual_relevancy import relevancy_messages

    chunks = [REFUND, SHIPPING]
    messages = relevancy_messages("Refunds?", chunks)
    schema = reply_schema(chunks, True)
    enforced = call_size(OpenAICompatBackend("http://127.0.0.1:9/v1", "m"), messages, schema)
    plain = call_size(
        OpenAICompatBackend("http://127.0.0.1:9/v1", "m", structured_output="off"),
        messages,
        schema,
    )
    assert "(the reply format is enforced)" in enforced.messages[0]["content"]
    assert enforced.schema_text and enforced.schema_text not in enforced.messages[0]["content"]
    assert plain.schema_text == "" and "JSON schema" in plain.messages[0]["content"]
    assert enforced.max_tokens == plain.max_tokens > 0


@pytest.mark.parametrize(
    "schema", [ContextVerdict, PrecisionVerdict, reply_schema([REFUND, facts(3)], True)]
)
def test_the_shortest_reply_is_valid(schema):
    schema.model_validate(shortest_reply(schema))


# --- the cap --------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [0.0004, 0.0011, 0.0023])
def test_a_capped_run_never_spends_past_its_cap(cap, tmp_path):
    cases = rag_cases(40)
    with FakeOpenAIServer(reply=reply, latency=0.01) as server:
        judge = f"{server.base_url}#{MODEL}?concurrency=8"
        run = evaluate(cases, ["contextual-relevancy"], judge=judge, cache=tmp_path / "c.sqlite3",
                       max_cost=cap, progress=False)  # fmt: skip
        paid = spent(server)
    summary = run.summaries["contextual-relevancy"]
    assert paid <= cap and run.accounting.total.cost <= cap
    assert run.stopped is not None and f"${cap:g}" in run.stopped
    assert summary.n_not_run > 0 and summary.n_failed == 0
    assert summary.n_scored + summary.n_not_run == len(cases)
    not_run = [r for r in run.results if r.not_run is not None]
    assert len(not_run) == summary.n_not_run and all(r.status == "not run" for r in not_run)
    assert all(r.score is None and r.error is None for r in not_run)


@pytest.fixture
def caps(monkeypatch):
    """The cost caps the runs made, as they ended."""
    made: list[CostCap] = []
    evaluate_module = importlib.import_module("contextlens.runner.evaluate")
    real = evaluate_module.cost_cap

    def keep(bound, max_cost):
        cap = real(bound, max_cost)
        if cap is not None:
            made.append(cap)
        return cap

    monkeypatch.setattr(evaluate_module, "cost_cap", keep)
    return made


@pytest.mark.parametrize(("cap", "concurrency"), [(0.003, 1), (0.01, 1), (0.01, 16)])
def test_a_capped_run_spends_most_of_its_cap_on_every_metric(cap, concurrency, caps):
    """Calls wait for room rather than stop the run while others are in flight, and the
    metrics take turns (for room and for slots): at any concurrency the run spends at least
    80% of its cap, every metric gets its share of the calls, even one whose calls come a
    little after the others', and the cap, the ledger and the server agree."""
    with FakeOpenAIServer(reply=every_reply, latency=0.02) as server:
        judge = f"{server.base_url}#{MODEL}?concurrency={concurrency}"
        run = evaluate(rag_cases(45), JUDGED, judge=judge, cache=False, max_cost=cap,
                       progress=False)  # fmt: skip
        paid = spent(server)
    [capped] = caps
    assert run.stopped == f"the cost cap of ${cap:g} was reached"
    assert 0.8 * cap <= paid <= cap, paid
    assert capped.spent == pytest.approx(run.accounting.total.cost) == pytest.approx(paid)
    assert capped.reserved == 0.0 and capped.left < capped.needed
    scored = {m: run.summaries[m].n_scored for m in JUDGED}
    assert min(scored.values()) >= max(scored.values()) / 2, scored  # shares, not leftovers
    for m in JUDGED:
        summary = run.summaries[m]
        assert run.accounting.by_metric[m].calls > 0 and summary.n_failed == 0
        assert summary.n_scored + summary.n_not_run == 45


def test_a_capped_run_without_a_cache_says_what_it_spent_and_left(run_cli, tmp_path):
    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(c.model_dump_json() for c in rag_cases(30)) + "\n")
    with FakeOpenAIServer(reply=every_reply) as server:
        code, text = run_cli("run", data, "-m", "contextual-relevancy", "-m", "faithfulness",
                             "--judge", f"{server.base_url}#{MODEL}?concurrency=16",
                             "--cache", "off", "--out", tmp_path / "out", "--no-store",
                             "--max-cost", "0.002")  # fmt: skip
        paid = spent(server)
    assert code == 4, text
    said = " ".join(text[text.index("stopped: ") :].split())  # the stop message, unwrapped
    assert "cache" not in said.lower(), said
    assert f"${paid:.4f} spent, ${0.002 - paid:.4f} left" in said
    run = EvalRun.from_folder(tmp_path / "out" / "latest")
    counts = {m: run.summaries[m].n_not_run for m in ("contextual-relevancy", "faithfulness")}
    assert all(counts.values())
    assert f"{sum(counts.values())} items not run" in said
    assert all(f"{m} {n}" in said for m, n in counts.items())
    assert "runs every case again" in said


class OverReporting(FakeOpenAIServer):
    """A server that reports a million prompt tokens for every call."""

    def _chat_body(self, request: dict, content: str, finish: str) -> dict:
        body = super()._chat_body(request, content, finish)
        body["usage"]["prompt_tokens"] = 1_000_000
        body["usage"]["total_tokens"] = 1_000_000 + body["usage"]["completion_tokens"]
        return body


def test_a_reported_usage_past_the_price_is_charged_as_the_ledger_counts_it(caps):
    """The cap charges what the ledger counts, however much that is, and sends no call
    after the first that passed it settled: only the calls already in flight."""
    with OverReporting(reply=reply, latency=0.05) as server:
        judge = f"{server.base_url}#{MODEL}?concurrency=4"
        run = evaluate(rag_cases(40), ["context-precision"], judge=judge, cache=False,
                       max_cost=0.02, progress=False)  # fmt: skip
        calls = server.calls
    [capped] = caps
    assert run.stopped is not None and calls <= 4
    assert capped.spent == pytest.approx(run.accounting.total.cost)
    assert capped.spent >= 0.15 * calls  # each call's million prompt tokens, at its price
    assert run.summaries["context-precision"].n_not_run == 40 - calls


def test_a_timed_out_call_counts_the_same_in_the_cap_and_the_ledger(caps):
    """A call that timed out may have been billed: the cap charges its whole reservation,
    and the ledger counts that as its cost too."""
    with FakeOpenAIServer(reply=reply, script=["timeout"], hang_time=2.0) as server:
        judge = f"{server.base_url}#{MODEL}?timeout=0.3"
        run = evaluate(rag_cases(3), ["context-precision"], judge=judge, cache=False,
                       max_cost=1.0, progress=False)  # fmt: skip
        paid = spent(server)  # the two answered calls, and the one that timed out
    [capped] = caps
    assert run.summaries["context-precision"].n_scored == 3
    assert run.accounting.total.calls == 4 and run.accounting.total.retries == 1
    assert capped.spent == pytest.approx(run.accounting.total.cost)
    assert capped.spent > paid * 3 / 4  # the timed-out call at its most, not at nothing


def test_a_capped_run_goes_on_from_the_cache_with_a_higher_cap(run_cli, tmp_path):
    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(c.model_dump_json() for c in rag_cases(30)) + "\n")
    cache = tmp_path / "cache.sqlite3"
    with FakeOpenAIServer(reply=reply) as server:
        args = ["run", data, "-m", "contextual-relevancy", "--judge", f"{server.base_url}#{MODEL}",
                "--cache", cache, "--out", tmp_path / "out", "--no-store"]  # fmt: skip
        code, text = run_cli(*args, "--max-cost", "0.001")
        assert code == 4, text
        assert "stopped: the cost cap of $0.001 was reached" in text and "not run" in text
        first = server.calls
        assert 0 < first < 30 and spent(server) <= 0.001
        code, text = run_cli(*args, "--max-cost", "1")
        assert code == 0, text
        assert server.calls == 30  # what was paid for is replayed, the rest is asked
    results = [json.loads(x) for x in (tmp_path / "out/latest/results.jsonl").open()]
    assert len(results) == 30 and all(r["score"] is not None for r in results)


def test_a_capped_run_writes_its_files_for_ci_and_every_case_it_read(run_cli, tmp_path):
    from contextlens.compare import compare

    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(c.model_dump_json() for c in rag_cases(30)) + "\n")
    out = tmp_path / "out"
    with FakeOpenAIServer(reply=reply) as server:
        code, text = run_cli("run", data, "-m", "contextual-relevancy", "--judge",
                             f"{server.base_url}#{MODEL}", "--cache", "off", "--out", out,
                             "--no-store", "--max-cost", "0.001", "--junit", tmp_path / "j.xml",
                             "--junit-items", "--csv", tmp_path / "items.csv")  # fmt: skip
    assert code == 4, text
    run = EvalRun.from_folder(out / "latest")
    summary = run.summaries["contextual-relevancy"]
    assert 0 < summary.n_not_run < 30
    assert sorted(run.cases()) == sorted(f"c{i}" for i in range(30))  # the not-run ones too
    junit = ET.parse(tmp_path / "j.xml").getroot()
    suite = junit.find("testsuite[@name='contextual-relevancy']")
    assert suite is not None and int(suite.get("skipped", "")) == summary.n_not_run
    assert int(suite.get("tests", "")) == 30 + 1  # and the metric's summary
    cap = junit.find("testsuite[@name='gates']/testcase[@name='cost cap']/failure")
    assert cap is not None and "the cost cap of $0.001 was reached" in cap.get("message", "")
    gates = junit.find("testsuite[@name='gates']")
    assert gates is not None and gates.get("failures") == "1"  # the cost cap: exit 4
    assert gates.get("skipped") == "1"  # --max-failures: not checked on part of the data
    with open(tmp_path / "items.csv", encoding="utf-8", newline="") as handle:
        statuses = [r["status"] for r in csv.DictReader(handle)]
    assert statuses.count("not run") == summary.n_not_run
    whole = next(d for d in compare(run, run).warnings if d.kind == "cases")
    assert "stopped before all its cases (the cost cap of $0.001 was reached)" in whole.message


def test_a_cap_needs_a_priced_model_and_says_so_before_any_call():
    with FakeOpenAIServer(reply=reply) as server:
        with pytest.raises(ValueError, match="price"):
            evaluate(rag_cases(2), ["context-precision"], judge=f"{server.base_url}#unpriced",
                     max_cost=1.0)  # fmt: skip
        assert server.calls == 0


def test_a_call_that_may_have_been_billed_is_charged_its_whole_reservation():
    cap = CostCap(1.0, prices=None)
    PRICES.register("cap-unit", 1_000_000, 0)  # one USD per prompt token
    try:
        with cap.spending("cap-unit", Usage(prompt_tokens=1)) as call:  # timed out: no usage
            pass
        assert cap.spent == 1.0
        with pytest.raises(CostCapReached), cap.spending("cap-unit", Usage(prompt_tokens=1)):
            pass
        released = CostCap(1.0)
        with released.spending("cap-unit", Usage(prompt_tokens=1)) as call:
            call.release()  # refused: not billed
        with released.spending("cap-unit", Usage(prompt_tokens=1)) as call:
            call.charge(Usage(prompt_tokens=1))
        assert released.spent == 1.0 and released.reserved == 0.0
        assert not math.isnan(released.spent)
    finally:
        PRICES._prices.pop("cap-unit", None)


class ReportingModel:
    """A DeepEval-shaped model that reports what each call cost (``None``: nothing, and no
    token usage either)."""

    def __init__(self, cost: float | None) -> None:
        self.cost, self.calls = cost, 0

    def get_model_name(self) -> str:
        return MODEL

    def generate(self, prompt: str, schema=None):
        self.calls += 1
        text = json.dumps({"reason": WHY, "score": 0.7})
        return text if self.cost is None else (text, self.cost)


def test_the_cap_charges_the_cost_a_model_reports_as_the_ledger_counts_it():
    cases = rag_cases(10)
    options = dict(cache=False, max_cost=0.002, max_concurrency=1, progress=False)
    silent = ReportingModel(None)  # no usage, no cost: each call is charged its reservation
    run = evaluate(cases, ["context-precision"], judge=silent, **options)
    assert silent.calls < 3 and run.stopped is not None
    reporting = ReportingModel(1e-7)  # far below its reservation: every case fits the cap
    run = evaluate(cases, ["context-precision"], judge=reporting, **options)
    assert reporting.calls == 10 and run.stopped is None
    assert run.accounting.total.cost == pytest.approx(10 * 1e-7)


def test_a_reported_cost_over_the_reservation_is_charged_whole_and_stops_the_run():
    cap = CostCap(1.0)
    PRICES.register("cap-unit", 1_000_000, 0)  # one USD per prompt token
    try:
        with cap.spending("cap-unit", Usage(prompt_tokens=0, completion_tokens=1)) as call:
            call.charge(Usage(), cost=1.5)  # the price table said 0; the model says 1.5
        assert cap.spent == 1.5 and cap.reserved == 0.0
        with pytest.raises(CostCapReached), cap.spending("cap-unit", Usage()):
            pass
    finally:
        PRICES._prices.pop("cap-unit", None)


def test_the_replies_measured_in_the_out_folder_are_the_expected_length(tmp_path):
    """After a run, a dry run of the same metric and judge into the same ``out`` folder
    expects the replies that run measured."""
    cases = rag_cases(8)
    with FakeOpenAIServer(reply=reply) as server:
        judge = f"{server.base_url}#{MODEL}"
        run = evaluate(cases, ["context-precision"], judge=judge, cache=False,
                       out=tmp_path / "out", progress=False)  # fmt: skip
        assert run.summaries["context-precision"].n_failed == 0
        measured = server.completion_tokens
        estimate = evaluate(cases, ["context-precision"], judge=judge, cache=False,
                            out=tmp_path / "out", dry_run=True)  # fmt: skip
        elsewhere = evaluate(cases, ["context-precision"], judge=judge, cache=False,
                             dry_run=True)  # fmt: skip
    [row] = estimate.metrics
    assert row.completion_source == "measured" and row.completion_tokens == measured
    assert elsewhere.metrics[0].completion_source == "typical"


def test_the_cache_key_holds_the_reply_format_mode(tmp_path):
    """The same call in another reply format is not answered from the cache."""
    cache = tmp_path / "c.sqlite3"
    cases = rag_cases(2)
    with FakeOpenAIServer(reply=reply) as server:
        for mode in ("auto", "off", "auto"):
            judge = f"{server.base_url}#{MODEL}?structured_output={mode}"
            evaluate(cases, ["context-precision"], judge=judge, cache=cache, progress=False)
        assert server.calls == 4
