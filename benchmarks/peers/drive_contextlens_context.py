"""contextlens' ``context`` metric (context awareness) over the workload's sessions,
through ``contextlens.evaluate``.

Run by bench_peers.py with the project's venv, on the sessions file it writes
(``sessions.make_sessions`` of the cases), each a contextlens ``Dataset``. The judge is the
spec string ``"{base_url}#MODEL"`` (contextlens' OpenAI-compatible backend), the cache is
off, at most N judge calls are in flight: one call per interaction.
"""

from __future__ import annotations

from _common import load_cases, parse_args, timed, write_result
from sessions import count_interactions

import contextlens
from contextlens import Dataset, evaluate


def main() -> None:
    args = parse_args(__doc__ or "")
    raw = load_cases(args)
    sessions = [Dataset.model_validate(s) for s in raw]
    with timed() as timer:
        run = evaluate(
            sessions,
            ["context"],
            judge=f"{args.base_url}#{args.model}",
            max_concurrency=args.concurrency,
            cache=False,
            progress=False,
        )
    by_session = {r.case_id: r for r in run.iter_results()}
    scores = [
        by_session[s.session_id].score if s.session_id in by_session else None for s in sessions
    ]
    errors = [r.error for r in by_session.values() if r.error][:3]
    write_result(
        args,
        library="contextlens",
        version=contextlens.__version__,
        method=f"context, contextlens.evaluate(sessions, ['context'], judge='URL#MODEL', "
        f"max_concurrency={args.concurrency}, cache=False)",
        timer=timer,
        scores=scores,
        cases=count_interactions(raw),
        errors=errors,
    )


if __name__ == "__main__":
    main()
