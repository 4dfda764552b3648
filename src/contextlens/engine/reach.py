"""Whether a judge can be reached: a judge that never answered and refuses connections is a
clear error in seconds; one that answered and then went down is retried, and says so.

Each backend (by its key) has one :class:`Reach`, shared by every run of the process. A call
that gets any reply from the server marks it answered. A call the server refused (nobody
listens on the port, the name does not resolve) marks it down. When no call to it has ever
been answered and it has refused calls for :data:`PROBE_SECONDS`, the next refused call raises
:class:`JudgeUnreachable`, which stops the run, and so does the :data:`PROBE_TIMEOUTS`-th
timed-out call of a judge that never answered; a judge that answered before keeps the retry
budget, so a server restarting loses no item, and :func:`unreachable` lists those that are
down for the progress display.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from contextlens.errors import ContextLensError

__all__ = [
    "PROBE_SECONDS",
    "PROBE_TIMEOUTS",
    "JudgeUnreachable",
    "Reach",
    "reach_for",
    "unreachable",
]

#: Seconds a judge that never answered may refuse connections before the run stops.
PROBE_SECONDS = 4.0
#: Calls of a judge that never answered that may time out before the run stops (one may be a
#: cold start: a model loading).
PROBE_TIMEOUTS = 3


class JudgeUnreachable(ContextLensError):
    """No call to the judge was ever answered and it refuses connections: the run stops."""


@dataclass
class Reach:
    """What is known of reaching one backend: ``answered`` once any call got a reply;
    ``down_since`` (wall-clock) and ``error`` while calls are refused."""

    key: str
    answered: bool = False
    timeouts: int = 0
    first_refused: float | None = None
    down_since: datetime | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def on_answer(self) -> None:
        """A reply came (any status): the server is there."""
        with self._lock:
            self.answered = True
            self.first_refused = self.down_since = self.error = None
            self.timeouts = 0

    def on_refused(self, error: str, where: str) -> None:
        """A call was refused; :class:`JudgeUnreachable` when the judge never answered and
        has refused for :data:`PROBE_SECONDS`."""
        now = time.monotonic()
        with self._lock:
            if self.first_refused is None:
                self.first_refused = now
                self.down_since = datetime.now(timezone.utc)
            self.error = error
            never = not self.answered
            waited = now - self.first_refused
        if never and waited >= PROBE_SECONDS:
            raise JudgeUnreachable(
                f"the judge {where} cannot be reached: {error} (no call was ever answered, "
                f"refused for {waited:.0f} s). Check that the server runs, and the host, port "
                "and path of the judge spec"
            )

    def on_timeout(self, error: str, where: str) -> None:
        """A call timed out; :class:`JudgeUnreachable` when the judge never answered and
        :data:`PROBE_TIMEOUTS` calls have timed out: a server that takes connections and
        never replies (the wrong port of a proxy, a hung process) would otherwise hold every
        item for its whole retry budget."""
        with self._lock:
            if self.answered:
                return
            self.timeouts += 1
            count = self.timeouts
        if count >= PROBE_TIMEOUTS:
            raise JudgeUnreachable(
                f"the judge {where} gives no reply: {error} ({count} calls timed out and no "
                "call was ever answered; it takes connections but does not reply). Check that "
                "it serves the API at that URL, or give it longer with --judge-timeout "
                "(?timeout= on the judge spec)"
            )


_reaches: dict[str, Reach] = {}
_lock = threading.Lock()


def reach_for(key: str) -> Reach:
    """The :class:`Reach` of the backend ``key``."""
    with _lock:
        found = _reaches.get(key)
        if found is None:
            found = _reaches[key] = Reach(key)
        return found


def unreachable() -> list[Reach]:
    """The backends that answered before and refuse calls now."""
    with _lock:
        return [r for r in _reaches.values() if r.answered and r.down_since is not None]
