"""Paired comparison of two runs: pairing, counting, statistics, verdicts, determinism, and
the tolerance a case's move must pass to count as a regression or an improvement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contextlens.compare import compare
from contextlens.errors import InputError
from contextlens.runner import EvalRun, ItemResult, MetricSummary
from contextlens.store import RunStore


def make_run(run_id: str, items: dict[str, dict[str, float | None]]) -> EvalRun:
    """``items``: metric -> case_id -> score (None: failed)."""
    results = [
        ItemResult(
            case_id=case_id,
            metric=metric,
            score=score,
            error=None if score is not None else "JudgeError: bad reply",
        )
        for metric, scores in items.items()
        for case_id, score in scores.items()
    ]
    summaries = {
        metric: MetricSummary(
            metric=metric,
            n=len(scores),
            n_scored=sum(s is not None for s in scores.values()),
            n_failed=sum(s is None for s in scores.values()),
            mean=None,
        )
        for metric, scores in items.items()
    }
    return EvalRun(
        run_id=run_id,
        started_at="2024-05-01T10:00:00+00:00",
        duration_s=0.0,
        judge="offline",
        embedder="minilm",
        repeats=1,
        summaries=summaries,
        accounting={},
        results=results,
    )


def noisy(n: int, seed: int, shift: float = 0.0, noise: float = 0.05) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(0).uniform(0.2, 0.8, n)
    return {f"c{i:03d}": float(v) for i, v in enumerate(base + shift + rng.normal(0, noise, n))}


def test_identical_runs():
    scores = noisy(50, 1)
    result = compare(make_run("a", {"m": scores}), make_run("b", {"m": scores}))
    m = result.metric("m")
    assert m.n_paired == 50 and m.mean_diff == 0.0
    assert (m.ci_low, m.ci_high) == (0.0, 0.0)
    assert m.p_b_better == 0.5
    assert m.verdict == "identical scores"
    assert result.verdicts == {"m": "identical scores"}


def test_same_mean_with_noise_gives_an_interval_around_zero():
    a = make_run("a", {"m": noisy(80, 1)})
    b = make_run("b", {"m": noisy(80, 2)})
    m = compare(a, b).metric("m")
    assert m.ci_low < 0.0 < m.ci_high
    assert 0.05 < m.p_b_better < 0.95
    assert m.verdict.startswith("no clear difference (P=")
    assert m.ci_level == 0.95


def test_shift_is_detected_both_ways():
    a = make_run("a", {"m": noisy(60, 1)})
    b = make_run("b", {"m": noisy(60, 2, shift=0.1)})
    up = compare(a, b).metric("m")
    assert up.mean_diff == pytest.approx(up.mean_b - up.mean_a)
    assert 0.05 < up.mean_diff < 0.15
    assert up.ci_low > 0.0 and up.p_b_better > 0.99
    assert up.verdict.startswith("B is better (P=")
    down = compare(b, a).metric("m")
    assert down.ci_high < 0.0 and down.p_b_better < 0.01
    assert down.verdict.startswith("B is worse (P=")


def test_interval_matches_a_direct_bootstrap_of_the_differences():
    a_scores, b_scores = noisy(30, 1), noisy(30, 2, shift=0.02)
    m = compare(make_run("a", {"m": a_scores}), make_run("b", {"m": b_scores})).metric("m")
    d = np.array([b_scores[c] - a_scores[c] for c in sorted(a_scores)])
    assert m.mean_diff == pytest.approx(d.mean())
    assert [p.case_id for p in m.pairs] == sorted(a_scores)
    assert all(p.diff == pytest.approx(p.b - p.a) for p in m.pairs)
    # the Bayesian bootstrap interval is close to mean +- 1.96 standard errors
    se = d.std(ddof=1) / np.sqrt(d.size)
    assert m.ci_low == pytest.approx(d.mean() - 1.96 * se, abs=0.4 * se)
    assert m.ci_high == pytest.approx(d.mean() + 1.96 * se, abs=0.4 * se)


def test_unpaired_and_failed_items_are_counted():
    a = make_run(
        "a",
        {"m": {"c1": 0.1, "c2": 0.2, "c3": None, "c4": 0.4, "only_a": 0.5, "fa_only": None}},
    )
    b = make_run("b", {"m": {"c1": 0.2, "c2": 0.3, "c3": 0.3, "c4": None, "only_b": 0.1}})
    m = compare(a, b).metric("m")
    assert m.n_paired == 2 and [p.case_id for p in m.pairs] == ["c1", "c2"]
    assert (m.n_a, m.n_b) == (6, 5)
    assert (m.n_only_a, m.n_only_b) == (2, 1)
    assert (m.n_failed_a, m.n_failed_b) == (2, 1)
    assert (m.n_unpaired_a, m.n_unpaired_b) == (4, 3)
    assert m.mean_a == pytest.approx(0.15) and m.mean_b == pytest.approx(0.25)
    assert any("not paired: 4 of 6 items in A, 3 of 5 in B" in n for n in m.notes)
    # a constant +0.1 on both pairs: zero-width interval at 0.1, certainly better
    assert m.ci_low == pytest.approx(0.1) and m.ci_high == pytest.approx(0.1)
    assert m.p_b_better == 1.0


def test_duplicate_case_ids_are_not_paired_but_counted():
    a = make_run("a", {"m": {"c1": 0.1, "c2": 0.2, "c3": 0.3}})
    b = make_run("b", {"m": {"c1": 0.2, "c2": 0.3, "c3": 0.4}})
    b.results.append(ItemResult(case_id="c3", metric="m", score=0.9))
    m = compare(a, b).metric("m")
    assert m.n_paired == 2 and m.n_duplicate_b == 2 and m.n_b == 4
    assert any("repeated" in n for n in m.notes)


def test_too_few_pairs_and_metrics_in_one_run_only():
    a = make_run("a", {"m": {"c1": 0.5, "c2": None}, "only_a": {"c1": 0.3}})
    b = make_run("b", {"m": {"c1": 0.7, "c2": 0.1}, "only_b": {"c1": 0.3, "c2": 0.4}})
    result = compare(a, b)
    assert result.names == ["m", "only_a", "only_b"]
    m = result.metric("m")
    assert m.n_paired == 1 and m.mean_diff == pytest.approx(0.2)
    assert m.ci_low is None and m.ci_high is None and m.p_b_better is None
    assert m.verdict == "too few paired items (1)" and m.notes
    oa, ob = result.metric("only_a"), result.metric("only_b")
    assert oa.verdict == "only in run A" and oa.n_only_a == 1 and oa.n_paired == 0
    assert ob.verdict == "only in run B" and ob.n_only_b == 2 and ob.mean_diff is None
    with pytest.raises(KeyError, match="no metric 'zzz'"):
        result.metric("zzz")


def test_no_pairs_when_every_shared_item_failed():
    a = make_run("a", {"m": {"c1": None, "c2": None}})
    b = make_run("b", {"m": {"c1": 0.5, "c2": 0.5}})
    m = compare(a, b).metric("m")
    assert m.n_paired == 0 and m.verdict == "no paired items"
    assert m.n_failed_a == 2 and m.p_b_better is None


def test_deterministic_for_a_seed_and_independent_of_item_order():
    a_scores, b_scores = noisy(40, 1), noisy(40, 2, shift=0.01)
    a, b = make_run("a", {"m": a_scores}), make_run("b", {"m": b_scores})
    first = compare(a, b, seed=7)
    b_reversed = make_run("b", {"m": dict(reversed(list(b_scores.items())))})
    assert compare(a, b_reversed, seed=7) == first
    assert compare(a, b, seed=7).model_dump() == first.model_dump()
    other = compare(a, b, seed=8).metric("m")
    assert (other.ci_low, other.p_b_better) != (
        first.metric("m").ci_low,
        first.metric("m").p_b_better,
    )


def test_metrics_get_independent_streams():
    scores = noisy(30, 1)
    shifted = noisy(30, 2, shift=0.01)
    a = make_run("a", {"x": scores, "y": scores})
    b = make_run("b", {"x": shifted, "y": shifted})
    result = compare(a, b)
    assert result.metric("x").mean_diff == result.metric("y").mean_diff
    assert result.metric("x").ci_low != result.metric("y").ci_low


def test_run_ids_through_a_store(tmp_path):
    with RunStore(tmp_path / "runs.sqlite3") as store:
        store.record(make_run("aaaa1111", {"m": noisy(30, 1)}))
        store.record(make_run("bbbb2222", {"m": noisy(30, 2, shift=0.2)}))
        result = compare("aaaa", "bbbb", store=store)
        assert (result.run_a, result.run_b) == ("aaaa1111", "bbbb2222")
        assert result.metric("m").p_b_better > 0.99
        direct = compare(store.load("aaaa"), store.load("bbbb"))
        assert direct == result


def test_argument_checks():
    run = make_run("a", {"m": {"c1": 0.5}})
    with pytest.raises(ValueError, match="mc_samples"):
        compare(run, run, mc_samples=10)
    with pytest.raises(ValueError, match="ci_level"):
        compare(run, run, ci_level=1.0)
    with pytest.raises(ValueError, match="threshold"):
        compare(run, run, threshold=0.4)


# -- what changed, case by case; where the runs differ ---------------------------------------


def with_repeats(run: EvalRun, spread: dict[str, float]) -> EvalRun:
    """``run`` with each scored item judged three times, ``score`` -/+ ``spread[metric]``."""
    for item in run.results:
        if item.score is not None:
            d = spread[item.metric]
            item.repeats = [item.score - d, item.score, item.score + d]
            item.spread = float(np.std(item.repeats))
    run.repeats = 3
    return run


def test_a_move_within_the_noise_of_the_differences_is_no_regression():
    # every case moves a little (uniform in +-0.02); five drop by 0.3
    base = noisy(100, 1)
    wobble = np.random.default_rng(5).uniform(-0.02, 0.02, 100)
    moved = {c: v + w for (c, v), w in zip(base.items(), wobble, strict=True)}
    dropped = ["c010", "c020", "c030", "c040", "c050"]
    for c in dropped:
        moved[c] -= 0.3
    m = compare(make_run("a", {"m": base}), make_run("b", {"m": moved})).metric("m")
    t = m.tolerance
    assert t is not None and t.basis == "differences"
    mad = np.median(
        np.abs(np.array([p.diff for p in m.pairs]) - np.median([p.diff for p in m.pairs]))
    )
    assert t.noise == pytest.approx(1.4826 * mad)
    assert t.value == pytest.approx(1.959964 * t.noise, rel=1e-5)
    assert 0.02 < t.value < 0.3  # above the wobble, below the drops
    assert sorted(c.case_id for c in m.regressions) == dropped
    assert m.improvements == []
    assert m.n_within_noise == 95
    assert all(c.within_noise and c.change == "unchanged" for c in m.changes[5:])
    assert "1.96" in t.how and "100 paired differences" in t.how and "median absolute" in t.how


def test_the_noise_of_repeated_judgements_sets_the_tolerance():
    a_scores = {f"c{i}": 0.5 for i in range(20)}
    b_scores = {**a_scores, "c0": 0.44, "c1": 0.56, "c2": 0.39, "c3": 0.62}
    a = with_repeats(make_run("a", {"m": a_scores}), {"m": 0.05})
    b = with_repeats(make_run("b", {"m": b_scores}), {"m": 0.05})
    m = compare(a, b).metric("m")
    t = m.tolerance
    # each judgement varies by a sample variance of 0.05**2; an item's mean of three by a
    # third of it; the difference of two such means by twice that
    noise = np.sqrt(2 * 0.05**2 / 3)
    assert t.basis == "repeats" and t.noise == pytest.approx(noise)
    assert t.value == pytest.approx(1.959964 * noise, rel=1e-5)  # 0.080
    assert [(c.case_id, c.change) for c in m.changes[:2]] == [
        ("c2", "regressed"),
        ("c3", "improved"),
    ]
    assert {(c.case_id, c.change) for c in m.changes[2:4]} == {
        ("c0", "unchanged"),
        ("c1", "unchanged"),
    }
    assert m.changes[2].within_noise and m.n_within_noise == 2
    assert "3 judgements a case in A, 3 in B" in t.how
    # a run without repeats counts one judgement, as noisy as one of the other run's
    plain = make_run("b", {"m": b_scores})
    one_side = compare(a, plain).metric("m").tolerance
    assert one_side.noise == pytest.approx(np.sqrt(0.05**2 / 3 + 0.05**2))
    assert "one in B" in one_side.how
    # judgements that agree measure no noise: the smallest tolerance
    same = {"m": 0.0}
    agreeing = compare(
        with_repeats(make_run("a", {"m": a_scores}), same),
        with_repeats(make_run("b", {"m": b_scores}), same),
    ).metric("m")
    assert agreeing.tolerance.basis == "floor" and agreeing.tolerance.value == 0.001
    assert "the repeated judgements agree" in agreeing.tolerance.how
    assert len(agreeing.regressions) == 2


def test_the_smallest_tolerance_when_no_noise_is_measured():
    scores = noisy(30, 1)
    changed = {**scores, "c001": scores["c001"] - 0.0015, "c002": scores["c002"] + 0.0004}
    m = compare(make_run("a", {"m": scores}), make_run("b", {"m": changed})).metric("m")
    assert m.tolerance.basis == "floor" and m.tolerance.value == 0.001
    assert "more than half of the 30 paired differences are alike" in m.tolerance.how
    assert [c.case_id for c in m.regressions] == ["c001"] and m.n_within_noise == 1
    few = compare(make_run("a", {"m": {"c1": 0.5}}), make_run("b", {"m": {"c1": 0.4}}))
    assert few.metric("m").tolerance.basis == "floor"
    assert "too few" in few.metric("m").tolerance.how


def test_a_given_tolerance_for_every_metric_or_by_name():
    a = make_run("a", {"x": {"c1": 0.5, "c2": 0.5}, "y": {"c1": 0.5, "c2": 0.5}})
    b = make_run("b", {"x": {"c1": 0.45, "c2": 0.3}, "y": {"c1": 0.45, "c2": 0.3}})
    every = compare(a, b, tolerance=0.1)
    assert [len(m.regressions) for m in every.metrics] == [1, 1]
    assert every.metric("x").tolerance.how == "±0.1, as given"
    named = compare(a, b, tolerance={"x": 0.3, "*": 0.0})
    assert [len(m.regressions) for m in named.metrics] == [0, 2]
    assert named.metric("y").tolerance.basis == "given"
    only_x = compare(a, b, tolerance={"x": 0.3}).metric("y").tolerance
    assert only_x.basis == "floor"
    with pytest.raises(ValueError, match=r"no metric of the runs: \['z'\]"):
        compare(a, b, tolerance={"z": 0.1})
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="finite number >= 0"):
            compare(a, b, tolerance=bad)
    with pytest.raises(TypeError, match="must be a number"):
        compare(a, b, tolerance="0.1")  # type: ignore[arg-type]


def test_changes_list_regressions_first_largest_first():
    a = make_run("a", {"m": {"c1": 0.9, "c2": 0.5, "c3": 0.5, "c4": 0.2, "c5": 0.7, "c6": 0.4}})
    b = make_run("b", {"m": {"c1": 0.3, "c2": 0.4, "c3": 0.9, "c4": None, "c5": 0.7, "c7": 0.1}})
    m = compare(a, b).metric("m")
    assert [(c.case_id, c.change) for c in m.changes] == [
        ("c4", "newly failed"),
        ("c1", "regressed"),
        ("c2", "regressed"),
        ("c3", "improved"),
        ("c5", "unchanged"),
        ("c6", "only in A"),
        ("c7", "only in B"),
    ]
    assert [c.case_id for c in m.regressions] == ["c4", "c1", "c2"]
    assert m.changes[1].diff == pytest.approx(-0.6)


def test_unpaired_counts_each_case_once():
    # 30 cases in A; in B one failed and one absent: two cases are not paired, not three
    scores = {f"c{i:02d}": 0.5 for i in range(30)}
    a = make_run("a", {"m": scores})
    b_scores = {**scores, "c00": None}
    del b_scores["c01"]
    b = make_run("b", {"m": b_scores})
    a.results.append(ItemResult(case_id="c01", metric="m", score=None, error="JudgeError: x"))
    a.results[:] = [r for r in a.results if not (r.case_id == "c01" and r.error is None)]
    m = compare(a, b).metric("m")
    assert m.n_paired == 28 and m.n_unpaired == 2
    assert m.n_unpaired == len({c.case_id for c in m.changes if c.change != "unchanged"})


def _with_settings(run, judge="offline", threshold=0.5, prompts="p1", fingerprint="f1"):
    from contextlens.metrics.settings import MetricSettings

    for key, s in run.summaries.items():
        run.summaries[key] = s.model_copy(
            update={
                "judge": judge,
                "threshold": threshold,
                "settings": MetricSettings(values={"threshold": threshold}, prompts=prompts),
            }
        )
    run.data_fingerprint = fingerprint
    return run


def test_warnings_name_every_way_the_runs_differ():
    a = _with_settings(make_run("a", {"m": {"c1": 0.5, "c2": 0.6}}))
    same = _with_settings(make_run("b", {"m": {"c1": 0.5, "c2": 0.7}}))
    assert compare(a, same).warnings == []
    b = _with_settings(
        make_run("b", {"m": {"c1": 0.5, "c3": 0.7}}),
        judge="openai:gpt-4o-mini",
        threshold=0.7,
        prompts="p2",
        fingerprint="f2",
    )
    warnings = compare(a, b).warnings
    assert [w.kind for w in warnings] == ["judge", "settings", "prompts", "data", "cases"]
    by_kind = {w.kind: w.message for w in warnings}
    assert by_kind["judge"] == "m: judged by offline in A, by openai:gpt-4o-mini in B"
    assert by_kind["settings"] == (
        "m: the pass mark is 0.5 in A, 0.7 in B (the pass rates are of different bars)"
    )
    assert by_kind["cases"] == "the case sets differ: 1 case(s) only in A, 1 only in B"


def test_runs_are_named_by_their_folders(tmp_path):
    from contextlens.runner import evaluate
    from contextlens.schemas import ModelTestCase

    cases = [
        ModelTestCase(input="When?", actual_output="At 9.", retrieval_context=["9 am."], name="a"),
        ModelTestCase(
            input="Where?", actual_output="Here.", retrieval_context=["Main St."], name="b"
        ),
    ]
    first = evaluate(cases, ["context-similarity"], cache=False, progress=False, out=tmp_path)
    second = evaluate(cases[:1], ["context-similarity"], cache=False, progress=False, out=tmp_path)
    result = compare(str(Path(first.out_dir)), str(tmp_path))  # a folder, and OUT: its latest
    assert (result.run_a, result.run_b) == (first.run_id, second.run_id)
    m = result.metric("context-similarity")
    assert m.n_paired == 1 and m.n_unpaired == 1
    assert [w.kind for w in result.warnings] == ["data", "cases"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="neither a run folder"):
        compare(first.out_dir, str(tmp_path / "empty"))


def test_the_folder_of_a_run_that_did_not_complete_is_read_as_its_id_is(run_cli, tmp_path):
    """A run that died before its summary.json (a full disk, a kill) is compared by its
    folder as by its id, from the run store; a folder the store does not hold says so."""
    import json

    cases = tmp_path / "cases.jsonl"
    row = {"input": "When?", "actual_output": "At 9.", "retrieval_context": ["9 am."]}
    cases.write_text(json.dumps(row) + "\n")
    out, store = tmp_path / "out", tmp_path / "runs.sqlite3"
    folders = []
    for _ in range(2):
        code, text = run_cli("run", cases, "-m", "context-similarity", "--out", out,
                             "--store", store, "-q")  # fmt: skip
        assert code == 0, text
        folders.append((out / "latest").resolve())
    done, cut = folders
    (cut / "summary.json").unlink()  # as a run that stopped before it
    runs = RunStore(store)
    by_folder = compare(str(done), str(cut), store=runs)
    by_id = compare(done.name, cut.name, store=runs)
    assert (by_folder.run_a, by_folder.run_b) == (by_id.run_a, by_id.run_b) == (done.name, cut.name)
    code, text = run_cli("compare", done, cut, "--store", store)
    assert code == 0, text
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "results.jsonl").write_text("")
    with pytest.raises(InputError, match="the run store does not hold it"):
        compare(str(done), str(stray), store=runs)
