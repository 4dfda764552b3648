"""``contextlens demo``: the bundled TechStore sessions through ``context``."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from contextlens.cli.application import BOLD, RED, out
from contextlens.cli.options import (
    JUDGE_HELP,
    JudgeTimeout,
    MaxTokens,
    StructuredOutput,
    build_metrics,
    judge_option,
)
from contextlens.cli.run.execute import finish
from contextlens.cli.run.record import command_line
from contextlens.terminal import line


def demo(
    out_dir: Annotated[
        Path, typer.Option("--out", help="runs write into OUT/<run id>/; OUT/latest: the newest")
    ] = Path("contextlens-out/demo"),
    judge: Annotated[str | None, typer.Option(help=JUDGE_HELP + " [default: offline]")] = None,
    judge_timeout: JudgeTimeout = None,
    max_tokens: MaxTokens = None,
    structured_output: StructuredOutput = None,
) -> None:
    """Run the bundled TechStore sessions through `context`, offline unless --judge says."""
    from contextlens.loaders import load_cases
    from contextlens.metrics.base import DEFAULT_PASS, OFFLINE_SCALE_NOTE
    from contextlens.metrics.context import ContextDetails
    from contextlens.runner import RunConfig, RunFolder, evaluate

    data = Path(str(resources.files("contextlens.demo").joinpath("techstore.jsonl")))
    _, cases = load_cases(data)
    folder = RunFolder(out_dir)
    judge_obj = judge_option(
        judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
    )
    config = RunConfig(
        judge=judge_obj,
        cache=False,
        out=folder,
        progress=False,
        data_file=data,
        command=command_line(),
    )
    result = evaluate(cases, build_metrics(["context"]), config=config)
    if judge_obj is None or judge_obj == "offline":
        out.print(f"{OFFLINE_SCALE_NOTE} PASS marks below: {DEFAULT_PASS}.\n")
    for item in result.iter_results():
        mean = f"{item.score:.2f}" if item.score is not None else (item.not_applicable or "failed")
        out.print(line(Text(item.case_id, style=BOLD), f"  context awareness {mean}"))
        details = item.details
        interactions = details.interactions if isinstance(details, ContextDetails) else []
        for inter in interactions:
            if inter.not_applicable is not None:
                out.print(line(f"  {inter.qa_id} ", Text("N/A", style="yellow"), " ", inter.reason))
                continue
            if inter.score is None:
                out.print(line(f"  {inter.qa_id} ", Text("FAILED", style=RED), " ", inter.error))
                continue
            passed = inter.score >= DEFAULT_PASS
            mark = Text("PASS", style="green") if passed else Text("FAIL", style=RED)
            out.print(line(f"  {inter.qa_id} ", mark, f" {inter.score:.2f}  ", inter.reason))
    # an offline demo said it at the top, where its PASS marks are
    recorded = config.describe().with_extra({"demo": True})
    finish(result, folder, None, config=recorded, data=data, fingerprint=None, offline_note=False)
