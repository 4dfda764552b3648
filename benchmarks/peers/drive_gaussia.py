"""gaussia's Context over the workload's sessions: ``Context.run(Retriever, model=...)``.

Run by bench_peers.py with benchmarks/.peers-venv/bin/python, on the sessions file it
writes (``sessions.make_sessions`` of the cases). As gaussia's README and docs show: a
``Retriever`` subclass whose ``load_dataset`` returns gaussia ``Dataset`` sessions, and
``Context.run(SessionRetriever, model=judge)`` with LangChain's
``ChatOpenAI(base_url=<fake server>, temperature=0.0)`` as the judge, the default
``use_structured_output=False`` (the reply's JSON schema is stated in the prompt and the
answer read from a json block). Keyword arguments of ``Context.run`` beyond its own reach
the retriever, so the sessions are handed over that way.

gaussia judges one interaction at a time, session after session; it has no concurrency
setting, so ``--concurrency`` is not used. A reply it cannot read stops the whole run
(every session is then counted as failed).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from _common import load_cases, parse_args, timed, write_result
from gaussia import Batch, Dataset, Retriever
from gaussia.metrics.context import Context
from langchain_openai import ChatOpenAI
from sessions import count_interactions


class SessionRetriever(Retriever):
    """The sessions given to ``Context.run(..., sessions=[...])``."""

    def load_dataset(self) -> list[Dataset]:
        return [
            Dataset(
                session_id=s["session_id"],
                assistant_id=s["assistant_id"],
                language=s["language"],
                context=s["context"],
                conversation=[Batch(**b) for b in s["conversation"]],
            )
            for s in self.kwargs["sessions"]
        ]


def main() -> None:
    args = parse_args(__doc__ or "")
    sessions: list[dict[str, Any]] = load_cases(args)
    judge = ChatOpenAI(model=args.model, base_url=args.base_url, api_key="sk-fake", temperature=0.0)
    errors: list[str] = []
    with timed() as timer:
        try:
            metrics = Context.run(SessionRetriever, model=judge, sessions=sessions)
        except Exception as exc:  # one unreadable reply ends gaussia's run
            metrics, errors = [], [f"{type(exc).__name__}: {exc}"]
    by_session = {m.session_id: m.context_awareness for m in metrics}
    write_result(
        args,
        library="gaussia",
        version=version("gaussia"),
        method="Context.run(SessionRetriever, model=ChatOpenAI(base_url=..., "
        "temperature=0.0)), one interaction at a time (gaussia has no concurrency setting)",
        timer=timer,
        scores=[by_session.get(s["session_id"]) for s in sessions],
        cases=count_interactions(sessions),
        errors=errors,
    )


if __name__ == "__main__":
    main()
