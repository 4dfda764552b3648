"""The retrieval metric: each measure as defined, equal to trec_eval's (pytrec_eval) on the
TREC Deep Learning 2019 and 2020 judgements with a BM25 ranking of our own, and the metric
through evaluate and the command line."""

import asyncio
import json

import pytest

from contextlens import ModelTestCase, evaluate
from contextlens.cases import CaseRecord
from contextlens.metrics.base import Services
from contextlens.metrics.registry import resolve
from contextlens.metrics.retrieval import MEASURES, RetrievalMetric, retrieval_measures
from support import trec

CUTS = (1, 3, 5, 10, 20, 100)


def test_each_measure_by_hand():
    # ranks: x (unjudged), a (grade 2), b (grade 0), c (grade 1); d (grade 3) not retrieved
    found = retrieval_measures(["x", "a", "b", "c"], {"a": 2, "b": 0, "c": 1, "d": 3}, k=3)
    assert found.hit_rate == 1.0
    assert found.recall == pytest.approx(1 / 3)  # a of {a, c, d}
    assert found.precision == pytest.approx(1 / 3)
    assert found.mrr == pytest.approx(1 / 2)
    assert found.map == pytest.approx((1 / 2) / 3)
    ideal = 3 + 2 / 1.5849625007211562 + 1 / 2  # grades 3, 2, 1 at ranks 1..3
    assert found.ndcg == pytest.approx((2 / 1.5849625007211562) / ideal)
    # a relevance level of 2 makes c not relevant, and nDCG keeps using the grades
    strict = retrieval_measures(["x", "a", "b", "c"], {"a": 2, "b": 0, "c": 1, "d": 3}, 3, 2)
    assert (strict.recall, strict.map, strict.ndcg) == (0.5, 0.25, found.ndcg)
    # a list of ids: each of grade 1; a short list is not rewarded in precision
    short = retrieval_measures(["a"], ["a", "b"], k=5)
    assert (short.precision, short.recall, short.hit_rate, short.map) == (0.2, 0.5, 1.0, 0.5)
    nothing = retrieval_measures([], ["a"], k=5)
    assert set(nothing.model_dump(exclude={"k"}).values()) == {0.0}
    with pytest.raises(ValueError, match="no relevant id"):
        retrieval_measures(["a"], {"a": 0}, k=5)


pytrec_eval = pytest.importorskip("pytrec_eval")


def _trec_measures(
    qrels: dict[str, dict[str, int]], runs: dict[str, list[str]], level: int
) -> dict[int, dict[str, dict[str, float]]]:
    """trec_eval's values per cut-off and query; MRR@k from the run cut at k."""
    cuts = ",".join(map(str, CUTS))
    names = {f"P.{cuts}", f"recall.{cuts}", f"success.{cuts}", f"ndcg_cut.{cuts}"}
    names.add(f"map_cut.{cuts}")
    scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in runs.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=level).evaluate(scored)
    out: dict[int, dict[str, dict[str, float]]] = {}
    for k in CUTS:
        cut = {
            q: {d: s for d, s in ranked.items() if s > len(runs[q]) - k}
            for q, ranked in scored.items()
        }
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=level)
        reciprocal = rr.evaluate({q: r for q, r in cut.items() if r})
        out[k] = {
            q: {
                "hit_rate": v[f"success_{k}"],
                "recall": v[f"recall_{k}"],
                "precision": v[f"P_{k}"],
                "ndcg": v[f"ndcg_cut_{k}"],
                "map": v[f"map_cut_{k}"],
                "mrr": reciprocal.get(q, {}).get("recip_rank", 0.0),
            }
            for q, v in full.items()
        }
    return out


def _rankings():
    """(name, qrels, runs) for DL19 by BM25, DL20 by BM25 and DL19's ranked lists."""
    dl19, dl20 = trec.year("dl19"), trec.year("dl20")
    lists = {f"{q}/{i}": docs for i, (q, docs) in enumerate(trec.ranked_lists())}
    listed_qrels = {key: dl19.qrels[key.split("/")[0]] for key in lists}
    return [
        ("dl19-bm25", dl19.qrels, trec.bm25("dl19")),
        ("dl20-bm25", dl20.qrels, trec.bm25("dl20")),
        ("dl19-ranked-lists", listed_qrels, lists),
    ]


@pytest.mark.skipif(trec.data_dir() is None, reason="the shared TREC data folder is not here")
@pytest.mark.parametrize("level", [1, 2])
def test_every_measure_equals_trec_eval_on_trec_dl_2019_and_2020(level):
    compared = 0
    for name, qrels, runs in _rankings():
        judged = {q: r for q, r in runs.items() if any(g >= level for g in qrels[q].values())}
        expected = _trec_measures({q: qrels[q] for q in judged}, judged, level)
        for k in CUTS:
            metric = RetrievalMetric(k=k, relevance_level=level)
            cases = [
                ModelTestCase(input=q, retrieved_ids=r, relevant_ids=qrels[q], name=q)
                for q, r in judged.items()
            ]
            services = Services(judge=None, embedder=None)  # type: ignore[arg-type]
            results = asyncio.run(_score_all(metric, cases, services))
            for case, result in zip(cases, results, strict=True):
                ours = result.details.measures.model_dump()
                theirs = expected[k][case.name]
                for measure in MEASURES:
                    assert ours[measure] == pytest.approx(theirs[measure], abs=1e-9), (
                        name,
                        case.name,
                        k,
                        measure,
                    )
                    compared += 1
    assert compared > 5_000  # 97 queries and 210 lists, at 6 cut-offs, 6 measures each


async def _score_all(metric, cases, services):
    return await asyncio.gather(*(metric.score(c, services) for c in cases))


def test_the_score_is_the_chosen_measure_and_the_reason_names_what_was_missed():
    case = ModelTestCase(input="q", retrieved_ids=["x", "a", "y"], relevant_ids=["a", "b"])
    services = Services(judge=None, embedder=None)  # type: ignore[arg-type]
    default = asyncio.run(RetrievalMetric(k=3).score(case, services))
    assert default.score == pytest.approx(default.details.measures.ndcg)
    assert default.details.first_relevant_rank == 2 and default.details.missing == ["b"]
    assert "nDCG@3" in default.reason and "'b'" in default.reason
    assert "1 of 2 relevant" in default.reason
    recall = asyncio.run(RetrievalMetric(k=3, measure="recall").score(case, services))
    assert recall.score == 0.5
    none_relevant = ModelTestCase(input="q", retrieved_ids=["a"], relevant_ids={"a": 0})
    failed = asyncio.run(RetrievalMetric().score(none_relevant, services))
    assert failed.score is None and "no relevant id" in failed.error
    with pytest.raises(ValueError, match="k must be"):
        RetrievalMetric(k=0)
    with pytest.raises(ValueError, match="measure must be one of"):
        RetrievalMetric(measure="ndcg@10")
    assert resolve("RetrievalMetric").name == "retrieval"


def test_retrieval_through_evaluate_and_the_command_line(run_cli, tmp_path):
    rows = [
        {"id": "a", "input": "q1", "retrieved_ids": ["d1", "d2"], "relevant_ids": ["d2"]},
        {"id": "b", "input": "q2", "retrieved_ids": [7, 8], "relevant_ids": {"7": 2, "9": 1}},
        {"id": "c", "input": "q3", "retrieved_ids": ["d1"], "relevant_ids": {"d1": 0}},
    ]
    run = evaluate(
        [ModelTestCase(**r) for r in rows],
        [RetrievalMetric(k=2, measure="mrr"), RetrievalMetric(k=2, label="ndcg")],
        progress=False,
    )
    mrr = run.summaries["retrieval"]
    assert (mrr.n, mrr.n_scored, mrr.n_failed, mrr.mean) == (3, 2, 1, 0.75)
    assert mrr.judge is None and mrr.ci_low is not None
    assert run.summaries["retrieval:ndcg"].n_scored == 2

    # CSV: lists and objects as JSON cells
    csv = tmp_path / "ids.csv"
    csv.write_text(
        "id,question,retrieved_context_ids,reference_context_ids\n"
        'a,q1,"[""d1"", ""d2""]","[""d2""]"\n'
        'b,q2,"[""7"", ""8""]","{""7"": 2, ""9"": 1}"\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    code, text = run_cli("run", csv, "-m", "retrieval", "--out", out, "-q", "--no-store")
    assert code == 0, text
    lines = [json.loads(x) for x in (out / "latest" / "results.jsonl").read_text().splitlines()]
    by_id = {x["case_id"]: x for x in lines}
    assert by_id["a"]["details"]["measures"]["mrr"] == 0.5
    assert by_id["b"]["details"]["measures"]["recall"] == 0.5

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"input": "q", "retrieved_ids": ["d1", "d1"], "relevant_ids": ["d1"]})
    )
    code, text = run_cli("run", bad, "-m", "retrieval", "--no-store", "-q")
    assert code == 2 and "retrieved_ids" in text and "listed twice" in text
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"input": "q", "retrieved_ids": ["d1"]}))
    code, text = run_cli("run", missing, "-m", "retrieval", "--no-store", "-q")
    assert code == 2 and "requires 'relevant_ids'" in text


def test_a_retrieval_runs_csv_and_frame_carry_its_id_columns(tmp_path):
    import csv

    from contextlens.report.items import write_csv

    cases = [
        ModelTestCase(input="q1", retrieved_ids=["d1", "d2"], relevant_ids=["d2"], name="a"),
        ModelTestCase(input="q2", retrieved_ids=["d3"], relevant_ids={"d3": 2}, name="b"),
    ]
    run = evaluate(cases, ["retrieval"], cache=False, progress=False, keep_results=True)
    run.with_cases(CaseRecord(case_id=c.name or "", case=c) for c in cases)
    with write_csv(run, tmp_path / "items.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["case_id"]: r["retrieved_ids"] for r in rows} == {
        "a": '["d1", "d2"]',
        "b": '["d3"]',
    }
    assert json.loads({r["case_id"]: r["relevant_ids"] for r in rows}["b"]) == {"d3": 2}
    frame = run.to_pandas()
    assert {"retrieved_ids", "relevant_ids"} <= set(frame.columns)
    assert frame.set_index("case_id").loc["a", "retrieved_ids"] == ["d1", "d2"]
