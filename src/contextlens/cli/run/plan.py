"""The plan step of ``contextlens run``: every option, the file and its metrics checked before
the first judge call, and the run they make."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextlens.cli.application import UsageProblem, err
from contextlens.cli.formats import Outputs
from contextlens.cli.history import parse_tags
from contextlens.cli.options import (
    build_metrics,
    embedder_option,
    judge_option,
    option_problem,
    progress_option,
)
from contextlens.cli.run.args import RunArgs
from contextlens.cli.run.gate import parse_max_failures
from contextlens.errors import ContextLensError, InputError
from contextlens.terminal import line

if TYPE_CHECKING:
    from contextlens.loaders import Counted
    from contextlens.runner import Gate, RunConfig, RunFolder
    from contextlens.schemas import MetricKey

__all__ = ["RunPlan", "kind_name", "planned"]


@dataclass(frozen=True)
class Settings:
    """What the options give before the file is read: each checked."""

    outputs: Outputs
    tags: dict[str, str]
    judge: Any
    embedder: Any
    folder: RunFolder


@dataclass(frozen=True)
class RunPlan:
    """A run ready to go: its file (``source``, readable again), metrics, gates, settings,
    cases (read lazily, their number known) and where it runs (``executor``; None: here)."""

    args: RunArgs
    source: Path
    folder: RunFolder
    outputs: Outputs
    metrics: list[Any]
    keys: list[MetricKey]
    gates: list[Gate]
    config: RunConfig
    cases: Counted
    executor: Any


@contextmanager
def planned(args: RunArgs) -> Iterator[RunPlan]:
    """The plan of the run ``args`` ask for, made before any judge call: a mistake in the
    options is a usage problem, a bad file an :class:`InputError`. The file stays readable
    (standard input: a temporary copy) until the block ends."""
    from contextlens.loaders import readable

    settings = checked_settings(args)
    with readable(args.data, args.input_format) as source:
        yield plan_of(args, settings, source)


def checked_settings(args: RunArgs) -> Settings:
    """The options that need no file, checked in the order the command says them."""
    from contextlens.runner import RunFolder

    if args.fail_mode not in ("point", "interval"):
        raise UsageProblem(f"--fail-mode must be point or interval, got {args.fail_mode!r}")
    parse_max_failures(args.max_failures)
    if args.max_cost is not None and not args.max_cost > 0:
        raise UsageProblem(f"--max-cost expects a positive number of USD, got {args.max_cost:g}")
    if args.max_cost is not None and args.ray is not None:
        raise UsageProblem("--max-cost caps a run on this machine; run it without --ray")
    if args.triage and args.judge is None:
        raise UsageProblem(
            "--triage sends the items the offline scorer is unsure of to a judge: give --judge"
        )
    if args.triage and args.ray is not None:
        raise UsageProblem("--triage runs on this machine; run it without --ray")
    if args.batch and args.judge is None:
        raise UsageProblem("--batch sends the judge calls in batches: give --judge")
    if args.batch and args.ray is not None:
        raise UsageProblem("--batch waits for the provider's batches here; run it without --ray")
    if args.triage_band and not args.triage:
        raise UsageProblem("--triage-band sets a band of --triage: add --triage")
    outputs = Outputs(
        junit=args.junit, markdown=args.markdown, csv=args.csv, junit_items=args.junit_items
    )
    outputs.check(args.data if isinstance(args.data, Path) else None)
    tags = parse_tags(args.tag)
    judge = judge_option(
        args.judge,
        timeout=args.judge_timeout,
        max_tokens=args.max_tokens,
        structured_output=args.structured_output,
    )
    embedder = embedder_option(args.embedder)
    folder = RunFolder(args.out_dir)
    if not args.dry_run:
        folder.check()  # an --out that cannot be written is said before any work
    return Settings(outputs, tags, judge, embedder, folder)


def plan_of(args: RunArgs, settings: Settings, source: Path) -> RunPlan:
    """The run over ``source``: its metrics (by ``-m``, else the one its cases take), gates
    and pass marks named, every case read and checked."""
    from contextlens.loaders import Counted, case_kind, check_cases, load_cases
    from contextlens.metrics.registry import key_of
    from contextlens.runner import parse_gates, parse_pass_marks

    kind = case_kind(source)
    metrics = build_metrics(args.metric or [_default_metric(kind)])
    keys = [key_of(m) for m in metrics]
    metrics = with_bands(metrics, keys, args.triage_band)
    try:
        gates = parse_gates(args.fail_under, keys, mode=args.fail_mode)  # type: ignore[arg-type]
        pass_marks = parse_pass_marks(args.threshold, keys)
    except (ValueError, ContextLensError) as exc:
        raise UsageProblem(str(exc)) from None
    _check_case_types(kind, keys, metrics, args.data)
    executor = None if args.dry_run else _ray_executor(args.ray)
    config = _config(args, settings, pass_marks, source)
    _, count = check_cases(source, list(zip(keys, metrics, strict=True)))  # no call yet
    cases = Counted(load_cases(source)[1], count)
    return RunPlan(
        args=args,
        source=source,
        folder=settings.folder,
        outputs=settings.outputs,
        metrics=metrics,
        keys=keys,
        gates=gates,
        config=config,
        cases=cases,
        executor=executor,
    )


def with_bands(metrics: list[Any], keys: list[MetricKey], given: list[str]) -> list[Any]:
    """``metrics`` with the bands of ``--triage-band METRIC=LOW:HIGH`` set; a usage problem
    for a malformed one, an unknown metric or one without a triage band."""
    from contextlens.metrics.registry import UnknownMetricError, match

    out = list(metrics)
    for text in given:
        name, _, band = text.partition("=")
        low, _, high = band.partition(":")
        try:
            pair = (float(low), float(high))
        except ValueError:
            raise UsageProblem(f"--triage-band expects METRIC=LOW:HIGH, got {text!r}") from None
        try:
            k = keys.index(match(name.strip(), keys))
        except UnknownMetricError as exc:
            raise UsageProblem(f"--triage-band {text!r}: {exc}") from None
        if "triage_band" not in out[k].config_type.model_fields:
            raise UsageProblem(
                f"--triage-band {text!r}: {keys[k]} has no calibrated offline scorer to triage with"
            )
        try:
            out[k] = out[k].replace(triage_band=pair)
        except (TypeError, ValueError) as exc:
            raise UsageProblem(f"--triage-band {text!r}: {exc}") from None
    return out


def _config(
    args: RunArgs, settings: Settings, pass_marks: dict[MetricKey, float], source: Path
) -> RunConfig:
    from pydantic import ValidationError

    try:
        return _run_config(args, settings, pass_marks, source)
    except ValidationError as exc:  # an option out of range, said as the option
        raise option_problem(exc, RUN_OPTIONS) from None


#: The fields of :class:`~contextlens.runner.RunConfig` by the options of ``run`` that set them.
RUN_OPTIONS = {
    "judge": "--judge",
    "embedder": "--embedder",
    "max_concurrency": "--concurrency",
    "repeats": "--repeats",
    "cache": "--cache",
    "out": "--out",
    "store": "--store",
    "thresholds": "--threshold",
    "max_cost": "--max-cost",
    "triage": "--triage",
    "name": "--name",
    "tags": "--tag",
}


def _run_config(
    args: RunArgs, settings: Settings, pass_marks: dict[MetricKey, float], source: Path
) -> RunConfig:
    from contextlens.cli.run.record import command_line
    from contextlens.provenance import DataFile
    from contextlens.runner import RunConfig

    return RunConfig(
        judge=settings.judge,
        embedder=settings.embedder,
        max_concurrency=args.concurrency,
        repeats=args.repeats,
        cache=False if args.cache == "off" else (args.cache or True),
        out=settings.folder,
        store=False if args.no_store else args.store,
        thresholds=pass_marks,
        max_cost=args.max_cost,
        triage=args.triage,
        batch=args.batch,
        progress=progress_option("run", args.quiet),
        name=args.name,
        tags=settings.tags,
        data_file=DataFile.of(args.data, read=source),  # the path as given, the bytes read
        command=command_line(),
    )


def _check_case_types(kind: str, keys: list[MetricKey], metrics: list[Any], data: Path) -> None:
    """An :class:`InputError` for a metric that does not take what the file holds."""
    from contextlens.schemas import Dataset, ModelTestCase

    holds = Dataset if kind == "sessions" else ModelTestCase
    for key, m in zip(keys, metrics, strict=True):
        if not issubclass(holds, m.case_type):
            raise InputError(
                f"metric {key!r} takes {kind_name(m.case_type)}, but the file holds "
                f"{kind.replace('_', ' ')} (see `contextlens schema`)",
                file=str(data),
            )


def _default_metric(kind: str) -> str:
    """The metric a run without ``-m`` means: the one registered metric that takes what the
    file holds (said on stderr); a usage problem naming the choices when there are several."""
    from contextlens.metrics import registry
    from contextlens.schemas import Dataset, ModelTestCase

    holds = Dataset if kind == "sessions" else ModelTestCase
    found = [i for i in registry.registered().values() if issubclass(holds, i.case_type)]
    fitting = [i.name for i in found]
    # the turn metrics score the chunks of each turn: they are named with -m
    per_turn = [i.name for i in found if getattr(i.factory, "per_turn", False)]
    whole = [n for n in fitting if n not in per_turn]
    what = kind.replace("_", " ")
    if len(whole) == 1:
        turns = f" (the turn metrics {', '.join(per_turn)} are named with -m)" if per_turn else ""
        err.print(
            line(f"no -m given: the file holds {what}, which only {whole[0]!r} scores{turns}")
        )
        return whole[0]
    raise UsageProblem(
        f"name the metric(s) with -m: the file holds {what}, which "
        f"{', '.join(fitting) or 'no registered metric'} score (`contextlens schema`)"
    )


def kind_name(case_type: type) -> str:
    """What a metric's ``case_type`` is called on the command line."""
    from contextlens.schemas import Dataset, ModelTestCase

    if issubclass(case_type, Dataset):
        return "sessions"
    if issubclass(case_type, ModelTestCase):
        return "test cases"
    return case_type.__name__


def _ray_executor(address: str | None) -> Any:
    """The executor ``--ray ADDRESS`` asks for (None: run here)."""
    if address is None:
        return None
    if not address.strip():
        raise UsageProblem("--ray expects ADDRESS, auto or local")
    from contextlens.runner import resolve_executor

    try:
        executor: Any = resolve_executor("ray")
    except ImportError as exc:
        raise UsageProblem(str(exc)) from None
    executor.address = None if address == "local" else address
    executor.preflight()  # a cluster that is not there is said now, before any work
    return executor
