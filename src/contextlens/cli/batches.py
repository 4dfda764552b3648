"""``contextlens batches``: the batches a judge's runs left at the provider, and cancelling
them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from contextlens.cli.application import UsageProblem, out
from contextlens.sync import run_sync
from contextlens.terminal import line, table

if TYPE_CHECKING:
    from contextlens.judges.batching import BatchState

__all__ = ["batches"]


def batches(
    judge: Annotated[
        str,
        typer.Option(help="the judge spec the runs used (openai:MODEL, http://HOST:PORT/v1#MODEL)"),
    ],
    cancel: Annotated[
        bool, typer.Option("--cancel", help="cancel those that have not ended")
    ] = False,
) -> None:
    """The batches of JUDGE that runs submitted and have not read yet (a run stopped while
    they were running), as the provider says they are now; with --cancel, cancelled."""
    from contextlens.backend import ChatBackend
    from contextlens.judges.resolve import as_backend, batched

    backend = as_backend(judge)
    if backend is None or isinstance(backend, str):
        raise UsageProblem(f"--judge {judge!r}: batches are a judge's; give a judge spec")
    try:
        batching = batched(backend) if isinstance(backend, ChatBackend) else None
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if batching is None:
        raise UsageProblem(f"--judge {judge!r}: this judge makes its own calls, in no batch")

    async def ask() -> list[BatchState]:
        try:
            return await (batching.cancel_logged() if cancel else batching.logged())
        finally:
            await batching.aclose()

    states = run_sync(ask())
    if not states:
        out.print(line(f"no batches of {judge} are waiting to be read"))
        return
    rows = [[s.batch_id, s.status, f"{s.done}/{s.total}", str(s.failed)] for s in states]
    out.print(table(f"batches of {judge}", ["batch", "status", "done", "failed"], rows))
    if cancel:
        out.print(line(f"{len(states)} batch(es) cancelled; a run submits their calls again"))
    else:
        out.print(
            line("run the same command again to collect them, or add --cancel to cancel them")
        )
