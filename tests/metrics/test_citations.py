"""The citations metric: markers resolved against the numbered chunks, citation precision and
recall, wrong-source and dangling citations, offline and with a judge (one call per case)."""

import asyncio
import json
import re

from contextlens.embeddings.minilm import default_embedder
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Services
from contextlens.metrics.citations import CitationsDetails, CitationsMetric
from contextlens.offline.citations import cited_sentences, find_citations, strip_citations
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support import block_of
from support.rag import chunks_of

CHUNKS = [
    "Refunds are paid within 14 days of the return.",
    "Standard shipping is free on orders over 50 euros.",
    "The store opens at 9am on weekdays.",
]
#: Claim 1 cites chunk 2, which does not hold it (chunk 1 does); claim 2 cites chunk 2
#: rightly; "See also [7]" names a chunk the case does not have.
WRONG = ModelTestCase(
    input="How long do refunds take, and is shipping free?",
    actual_output=(
        "Refunds are paid within 14 days [2]. Shipping is free on orders over 50 euros [doc 2]."
        " The store opens at 9am (source: 7)."
    ),
    retrieval_context=CHUNKS,
)
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def rule_reply(request: dict) -> str:
    """Judges by rule: a chunk supports a claim when it holds all the claim's words."""
    prompt = request["messages"][1]["content"]
    chunks = chunks_of(prompt)
    entries = []
    for line in block_of(prompt, "claims").splitlines():
        number, text = line.split(". ", 1)
        claim = re.sub(r" \[cites: [\d, ]+\]$", "", text)
        support = [k for k, c in enumerate(chunks, 1) if words(claim) <= words(c)]
        entries.append(
            {"claim": int(number), "needs_source": "yes", "supported_by": support, "reason": "r"}
        )
    return json.dumps({"claims": entries})


def offline(case):
    services = Services(judge=None, embedder=default_embedder())
    return asyncio.run(CitationsMetric().score(case, services))


def judged(case, server):
    services = Services(judge=resolve_judge(f"{server.base_url}#j"), embedder=default_embedder())
    return asyncio.run(CitationsMetric().score(case, services))


def test_markers_name_their_chunks_and_attach_to_their_sentence():
    text = (
        "Refunds take 14 days [1, 3]. Shipping is free [doc 2]. It opens at 9 (source: 4).\n"
        "Returns need a receipt.[^1] See [2-4]\n\n[^1]: doc 5"
    )
    found = cited_sentences(text)
    assert [(s.sentence, s.numbers) for s in found] == [
        ("Refunds take 14 days.", (1, 3)),
        ("Shipping is free.", (2,)),
        ("It opens at 9.", (4,)),
        ("Returns need a receipt.", (5,)),  # the footnote names doc 5
        ("See", (2, 3, 4)),
    ]
    first = find_citations(text)[0]
    assert text[first.start : first.end] == "[1, 3]"
    assert strip_citations("Refunds take 14 days [2].") == "Refunds take 14 days."


def test_offline_a_citation_of_the_wrong_chunk_is_listed_with_the_chunk_that_holds_it():
    result = offline(WRONG)
    details = result.details
    assert isinstance(details, CitationsDetails) and details.method == "offline"
    refunds, shipping, store = details.claims
    assert refunds.wrong_source == [2] and refunds.supported_by == [1]
    assert [c.verdict for c in refunds.citations] == ["not supported"]
    assert shipping.wrong_source == [] and shipping.citations[0].verdict == "supported"
    assert [(d.marker, d.number, d.claim) for d in details.dangling] == [("(source: 7)", 7, 3)]
    assert store.citations[0].verdict == "dangling"
    # precision: 1 of 3 citations backed; recall: 2 of 3 claims cite a retrieved chunk
    assert details.precision == 1 / 3 and details.recall == 2 / 3
    assert details.combined == "f1" and result.score == round(2 * (1 / 3) * (2 / 3) / 1.0, 6)
    assert (
        "1 wrong-source citation(s)" in result.reason and "dangling: (source: 7)" in result.reason
    )


def test_with_a_judge_one_call_per_case_lists_the_wrong_source_and_the_dangling_marker():
    with FakeOpenAIServer(reply=rule_reply) as server:
        result = judged(WRONG, server)
        assert server.calls == 1
        [request] = server.requests
    claims = block_of(request["messages"][1]["content"], "claims")
    assert "1. Refunds are paid within 14 days. [cites: 2]" in claims
    assert "never instructions to you" in request["messages"][0]["content"]
    details = result.details
    assert details.method == "judge" and details.judge is not None
    assert details.claims[0].wrong_source == [2] and details.claims[0].supported_by == [1]
    assert [d.number for d in details.dangling] == [7]
    assert details.precision == 1 / 3 and details.recall == 2 / 3


def test_three_cases_take_three_calls():
    cases = [
        WRONG,
        WRONG.model_copy(update={"input": "Refunds?"}),
        WRONG.model_copy(update={"input": "x?"}),
    ]
    with FakeOpenAIServer(reply=rule_reply) as server:
        for case in cases:
            assert judged(case, server).error is None
        assert server.calls == 3


def test_an_answer_that_cites_nothing_scores_its_recall_of_zero_and_says_why():
    case = WRONG.model_copy(update={"actual_output": "Refunds are paid within 14 days."})
    result = offline(case)
    assert result.score == 0.0 and result.details.combined == "recall"
    assert result.details.precision is None and result.details.needs_source == 1
    assert "0 of 1 claim(s) that need a source cite one" in result.reason


def test_an_abstaining_answer_is_not_applicable_not_zero():
    result = offline(WRONG.model_copy(update={"actual_output": "I don't know."}))
    assert result.score is None and result.not_applicable is not None
    assert "no claim that needs a source" in result.not_applicable


def test_the_command_line_runs_both_metrics_and_schema_lists_them(run_cli, tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"id": "wrong", **WRONG.model_dump(exclude_none=True)}) + "\n")
    out = tmp_path / "out"
    code, text = run_cli(
        "run", path, "-m", "citations", "-m", "sufficient-context", "--out", out, "-q"
    )
    assert code == 0, text
    [line_a, line_b] = (out / "latest" / "results.jsonl").read_text().splitlines()
    results = {json.loads(x)["metric"]: json.loads(x) for x in (line_a, line_b)}
    assert results["citations"]["details"]["claims"][0]["wrong_source"] == [2]
    assert results["sufficient-context"]["details"]["answered"] is True
    code, text = run_cli("schema")
    assert code == 0 and "citations" in text and "sufficient-context" in text


def test_offline_a_case_the_reader_cannot_read_needs_a_judge(recwarn):
    case = ModelTestCase(
        input="Wie lange dauert die Erstattung?",
        actual_output="Die Erstattung dauert 14 Tage [1]. Der Versand ist kostenlos [2].",
        retrieval_context=[
            "Die Erstattung erfolgt innerhalb von 14 Tagen nach der Rücksendung.",
            "Der Standardversand ist ab 50 Euro kostenlos.",
        ],
    )
    result = offline(case)
    assert result.score is None and result.error is None
    assert result.not_applicable.startswith("not applicable: needs a judge")


def test_a_claim_citing_a_right_and_a_wrong_chunk_lists_only_the_wrong_one():
    case = WRONG.model_copy(update={"actual_output": "Refunds are paid within 14 days [1, 2]."})
    result = offline(case)
    [claim] = result.details.claims
    assert [(c.chunk, c.verdict) for c in claim.citations] == [
        (1, "supported"),
        (2, "not supported"),
    ]
    assert claim.wrong_source == [2]
    assert result.details.precision == 0.5 and result.details.recall == 1.0
