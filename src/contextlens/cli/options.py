"""What the commands share: the judge options, metrics and objects named on the command
line, progress lines for a log."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from contextlens.cli.application import UsageProblem, err
from contextlens.errors import ContextLensError
from contextlens.terminal import line, text

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "JUDGE_HELP",
    "JudgeTimeout",
    "MaxTokens",
    "ProgressLines",
    "StructuredOutput",
    "age",
    "build_metrics",
    "describe",
    "embedder_option",
    "fmt",
    "judge_option",
    "lines",
    "load_object",
    "near",
    "option_problem",
    "progress_option",
    "tags_cell",
    "when",
]

JUDGE_HELP = (
    "offline | openai:MODEL | http://HOST:PORT/v1#MODEL | litellm:PROVIDER/MODEL | "
    "llama:PATH.gguf | module:attr; settings may follow: ...#MODEL?timeout=300&max_tokens=400"
)
JudgeTimeout = Annotated[
    float | None,
    typer.Option(help="seconds per judge call, from when it is sent [default: 60; 300 local]"),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(help="completion tokens per judge call [default: sized from the reply schema]"),
]
StructuredOutput = Annotated[
    str | None,
    typer.Option(
        help="auto (constrained JSON where the server has it) | json_schema | json_object | off"
    ),
]


def build_metrics(names: list[str]) -> list[Any]:
    """The metrics the command line names, each with its defaults; an unknown name is a
    usage problem with the closest known one."""
    from contextlens.metrics import registry

    try:
        return [registry.create(name) for name in names]
    except registry.UnknownMetricError as exc:
        raise UsageProblem(str(exc)) from None


def load_object(spec: str, option: str = "") -> Any:
    """``module:attr`` from user code (called when it is a factory with no arguments); a
    usage problem naming ``option`` and ``spec`` for an attribute that is not there, or a
    class or function that cannot be called with no arguments or fails when it is."""
    module_name, _, attr = spec.partition(":")
    named = f"{option} {spec!r}" if option else repr(spec)
    sys.path.insert(0, str(Path.cwd()))
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageProblem(f"cannot load {named}: {exc}") from None
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return obj
    needed = _required_parameters(obj)
    if needed:
        raise UsageProblem(
            f"{named} is {describe(obj)}, which needs arguments ({', '.join(needed)}); name an "
            "object, or a class or function that makes one with no arguments"
        )
    try:
        return obj()
    except Exception as exc:  # the user's factory: said in one line, as a usage problem
        raise UsageProblem(
            f"cannot load {named}: {describe(obj)}() raised {type(exc).__name__}: {exc}"
        ) from None


def _required_parameters(factory: Any) -> list[str]:
    """The parameters ``factory`` must be given (none when its signature cannot be read)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def describe(obj: Any) -> str:
    """What ``obj`` is, in a few words: ``the function json.loads``, ``a builtins.object``."""
    name = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', '?')}"
    if inspect.isclass(obj):
        return f"the class {name}"
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"the function {name}"
    kind = type(obj)
    return f"a {kind.__module__}.{kind.__qualname__}"


#: What ``--judge module:attr`` may name.
JUDGE_OBJECTS = (
    "a judge is a spec string, a Judge, a ChatBackend, a LangChain chat model, a "
    "DeepEval-shaped model (get_model_name, generate / a_generate) or an Opik-shaped model "
    "(generate_string / agenerate_string), or a class or function that makes one with no "
    "arguments"
)


def judge_object(spec: str) -> Any:
    """The object ``--judge module:attr`` names, checked to be one a judge can be made of
    (a usage problem saying what it is, and what a judge must be, when not)."""
    from contextlens.judges.resolve import as_backend

    obj = load_object(spec, "--judge")
    try:
        as_backend(obj)
    except (TypeError, ValueError, FileNotFoundError) as exc:
        if isinstance(obj, str):
            raise UsageProblem(f"--judge {spec!r}: {exc}") from None
        raise UsageProblem(
            f"--judge {spec!r} is {describe(obj)}, not a judge: {JUDGE_OBJECTS}"
        ) from None
    return obj


def embedder_option(spec: str | None) -> Any:
    """``--embedder``: None for ``minilm`` (the default), else the embeddings object
    ``module:attr`` names, checked; a usage problem for anything else (a URL: no embedder
    is reached by one)."""
    from contextlens.embeddings.adapters import as_embedder
    from contextlens.judges.spec import url_scheme

    if spec is None or spec.strip() == "minilm":
        return None
    form = "--embedder takes minilm or module:attr naming an embeddings object"
    if url_scheme(spec) is not None:
        raise UsageProblem(f"--embedder {spec!r}: an embedder is not named by a URL; {form}")
    if ":" not in spec:
        raise UsageProblem(f"--embedder {spec!r}: unknown embedder; {form}")
    obj = load_object(spec, "--embedder")
    try:
        as_embedder(obj)
    except TypeError as exc:
        raise UsageProblem(f"--embedder {spec!r}: {exc}") from None
    return obj


def option_problem(exc: ValidationError, options: dict[str, str]) -> UsageProblem:
    """The first error of ``exc`` as a usage problem naming the option (``options`` maps a
    model field to it): ``--concurrency expects a whole number >= 1, got 0``."""
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    option = options.get(field, field or "an option")
    given = first.get("input")
    ctx = first.get("ctx") or {}
    number = isinstance(given, (int, float)) and not isinstance(given, bool)
    got = f"{given:g}" if isinstance(given, float) else repr(given) if not number else given
    noun = "a whole number" if isinstance(given, int) and number else "a number"
    kind = first["type"]
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<="}
    bounds["less_than"] = "<"
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        limit = f"{limit:g}" if isinstance(limit, float) else limit
        return UsageProblem(f"{option} expects {noun} {bounds[kind]} {limit}, got {got}")
    if kind == "finite_number":
        return UsageProblem(f"{option} expects a finite number, got {got}")
    message = str(first["msg"]).removeprefix("Value error, ")
    return UsageProblem(f"{option}: {message}, got {got}")


def judge_option(
    spec: str | None,
    *,
    timeout: float | None = None,
    max_tokens: int | None = None,
    structured_output: str | None = None,
) -> Any:
    """``--judge`` and its settings: None, ``offline``, a :class:`JudgeSpec` with the flags'
    settings over the spec's own (every mistake a usage problem, before any work), or the
    object ``module:attr`` names."""
    from pydantic import ValidationError

    from contextlens.judges.spec import OFFLINE, JudgeSettings, JudgeSpec, is_offline, is_spec

    try:
        flags = JudgeSettings(
            timeout=timeout, max_tokens=max_tokens, structured_output=structured_output
        )
    except ValidationError as exc:
        raise option_problem(exc, JUDGE_FLAGS) from None
    except (ValueError, ContextLensError) as exc:
        raise UsageProblem(f"judge settings: {exc}") from None
    if spec is None or is_offline(spec):
        return None if spec is None else OFFLINE
    if is_spec(spec):
        try:
            return JudgeSpec.parse(spec).with_settings(flags)
        except (ValueError, FileNotFoundError) as exc:
            raise UsageProblem(str(exc)) from None
    if flags.given():
        raise UsageProblem(
            "--judge-timeout, --max-tokens and --structured-output apply to judge spec "
            f"strings; set them on the object {spec!r} itself"
        )
    return judge_object(spec)


#: The judge settings' fields by the options that set them.
JUDGE_FLAGS = {
    "timeout": "--judge-timeout",
    "max_tokens": "--max-tokens",
    "structured_output": "--structured-output",
}


def progress_option(label: str, quiet: bool) -> Any:
    """The ``progress`` of a command: none with ``-q``, a bar on a terminal, lines in a log."""
    if quiet:
        return False
    return None if sys.stderr.isatty() else ProgressLines(label)


class ProgressLines:
    """Progress for a log (stderr not a terminal): a line on stderr for the first item, then
    every ``every_s`` seconds or tenth of the items, whichever comes first, at once when a
    judge goes down or comes back or a provider batch the run waits for changes, and at the
    end. The rate and the time left are those of
    recent completions (:class:`~contextlens.runner.progress.Throughput`)."""

    def __init__(self, label: str, every_s: float = 10.0, steps: int = 10) -> None:
        from contextlens.runner.progress import Throughput

        self.label, self.every_s, self.steps = label, every_s, steps
        self.last_s = 0.0
        self.next_step = 0
        self.last_down = ""
        self.throughput = Throughput()

    def __call__(self, done: int, total: int | None, elapsed: float) -> None:
        from contextlens.engine.accounting import current_ledger
        from contextlens.runner.progress import batches_text, down_text, rate_text

        self.throughput.update(done, elapsed)
        step = done * self.steps // total if total else 0
        down = down_text() + batches_text()
        changed, self.last_down = down != self.last_down, down
        if step < self.next_step and elapsed - self.last_s < self.every_s and not changed:
            return
        self.last_s, self.next_step = elapsed, max(self.next_step, step + 1)
        count = f"{done}/{total} items ({done / total:.0%})" if total else f"{done} items"
        rate = self.throughput.rate()
        speed = "" if rate is None else f", {rate_text(rate)}"
        said = f"{self.label}: {count}{speed}, {elapsed:.0f} s elapsed"
        left = self.throughput.left(total)
        if left is not None and total and done < total:
            said += f", about {left:.0f} s left"
        ledger = current_ledger.get()
        latency = ledger.call_latency() if ledger is not None else None
        if latency is not None:
            said += f"; {latency[0]} judge calls, {latency[1]:.1f} s per call"
        err.print(line(said + down))


def age(started_at: str) -> str:
    """How long ago an ISO time was, in the largest whole unit (``3 h``, ``2 d``)."""
    from datetime import datetime, timezone

    try:
        then = datetime.fromisoformat(started_at)
    except ValueError:
        return "unknown time"
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    seconds = max(0.0, (datetime.now(timezone.utc) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def when(started_at: str) -> str:
    """An ISO time as ``2026-03-01 14:05`` (in UTC, as runs record it)."""
    from datetime import datetime, timezone

    try:
        then = datetime.fromisoformat(started_at)
    except ValueError:
        return started_at
    if then.tzinfo is not None:
        then = then.astimezone(timezone.utc)
    return then.strftime("%Y-%m-%d %H:%M")


def lines(values: Iterable[Any]) -> Text:
    """Values as the lines of one cell (``-`` when there are none)."""
    shown = [text(v) for v in values]
    return Text("\n").join(shown) if shown else Text("-")


def tags_cell(tags: dict[str, str]) -> Text:
    """A run's tags, one ``key=value`` a line (``-`` when it has none)."""
    return lines(f"{k}={v}" for k, v in tags.items())


def near(path: str) -> str:
    """``path`` relative to the working folder when it lies inside it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
