"""Make ``meta_eval.jsonl.gz`` from RAGChecker's meta-evaluation files.

Run: python benchmarks/ragchecker/convert.py HUMAN_LABELED_DATA.json BASELINE_RAGCHECKER.json

The inputs are ``data/meta_evaluation/human_labeled_data.json`` and
``data/meta_evaluation/baseline_ragchecker.json`` of github.com/amazon-science/RAGChecker
(Apache-2.0). One line per instance: the query, the reference answer, the two responses, both
annotators' labels and RAGChecker's own scores of each response.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

LABELS = ("correctness_label", "completeness_label", "overall_label")


def main() -> None:
    human = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    checker = {r["instance_id"]: r for r in json.loads(Path(sys.argv[2]).read_text("utf-8"))}
    by_instance: dict[int, dict[str, object]] = {}
    for row in human:
        iid = int(row["instance_id"])
        line = by_instance.setdefault(
            iid,
            {
                "instance_id": iid,
                "dataset": row["dataset"],
                "query": row["query"],
                "gt_answer": row["gt_answer"],
                "systems": [row["model1"]["model_name"], row["model2"]["model_name"]],
                "responses": [row["model1"]["response"], row["model2"]["response"]],
                "human": [],
                "ragchecker": [
                    {k.removesuffix("_label"): checker[iid][m]["ragchecker"][k] for k in LABELS}
                    for m in ("model1", "model2")
                ],
            },
        )
        human_labels = line["human"]
        assert isinstance(human_labels, list)
        human_labels.append({k.removesuffix("_label"): row[k] for k in LABELS})
    out = Path(__file__).with_name("meta_eval.jsonl.gz")
    with gzip.open(out, "wt", encoding="utf-8") as f:
        for iid in sorted(by_instance):
            f.write(json.dumps(by_instance[iid], ensure_ascii=False) + "\n")
    print(f"{len(by_instance)} instances -> {out}")


if __name__ == "__main__":
    main()
