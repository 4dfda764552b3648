"""Which offline reader scores a case: by its language and the faithfulness model asked for.

* English cases: the faithfulness model asked for (``support_model=`` on the metric, else
  ``$CONTEXTLENS_SUPPORT_MODEL``, else :data:`DEFAULT_SUPPORT_MODEL`): ``"features"``, the
  logistic model over word and embedding features (:mod:`contextlens.offline.support`), or
  ``"reader"``, the claim reader with its calibration
  (:mod:`contextlens.offline.support_reader`); relevance by the bundled relevance model.
* Cases not in English (:mod:`contextlens.offline.language`): with the ``multilingual``
  extra installed and the models fitted for it in ``offline/weights/``
  (``support_multilingual``, ``relevance_multilingual``, which read embeddings and figures
  only; ``benchmarks/fit_multilingual.py`` fits them, and the package ships neither), the
  multilingual embedder (:mod:`contextlens.embeddings.multilingual`); otherwise the English
  reader, and the result says that the offline scorer reads English only (and a warning says
  it once).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from contextlens.embeddings.base import Embedder
from contextlens.embeddings.multilingual import multilingual_embedder
from contextlens.offline.language import ENGLISH_ONLY, warn_english_only
from contextlens.offline.model import held_out_figures, load_model
from contextlens.offline.relevance import RelevanceItem, RelevanceResult, score_relevance
from contextlens.offline.support import SupportItem, SupportResult, score_support
from contextlens.offline.support_reader import score_support_reader

SupportModel = Literal["features", "reader"]
SUPPORT_MODELS: tuple[str, ...] = ("features", "reader")
#: The faithfulness model of English cases when none is asked for: the reader is behind it
#: on the natural held-out sources (``benchmarks/fit_reader_calibration.py``).
DEFAULT_SUPPORT_MODEL: SupportModel = "features"
ENV_SUPPORT_MODEL = "CONTEXTLENS_SUPPORT_MODEL"
#: What each reader is, for ``details.offline_model_is``.
DESCRIPTIONS = {
    "features": "logistic model over word and embedding features (offline/weights/support.json)",
    "reader": "claim reader (supported / contradicted / not mentioned), MiniLM int8 ONNX "
    "(offline/assets/claim-reader), calibrated on held-out public sources "
    "(offline/weights/support_reader.json); held out, behind the features model on the "
    "natural sources and ahead of it on one-edit contradictions",
    "multilingual": "multilingual-e5-small embeddings and figures "
    "(offline/weights/support_multilingual.json)",
    "relevance": "relevance model over the bundled embedder (offline/weights/relevance.json)",
    "relevance-multilingual": "multilingual-e5-small cosine "
    "(offline/weights/relevance_multilingual.json)",
}

#: The model file whose card holds each support reader's held-out figures, and its name.
CARDS = {
    "features": ("support", "The offline features model itself"),
    "reader": ("support_reader", "The offline claim reader itself"),
}


def held_out_of(reader: str | None) -> str | None:
    """What the card of a support reader says of it on the public sources held out."""
    if reader not in CARDS:
        return None
    name, what = CARDS[reader]
    return held_out_figures(load_model(name), what)


SupportScorer = Callable[[Sequence[SupportItem]], Awaitable[list[SupportResult]]]


def resolve_support_model(name: str | None) -> SupportModel:
    """The faithfulness model asked for: ``name``, else the environment, else the default
    (an unknown name is a ``ValueError`` naming the known ones)."""
    chosen = name or os.environ.get(ENV_SUPPORT_MODEL, "").strip() or DEFAULT_SUPPORT_MODEL
    if chosen not in SUPPORT_MODELS:
        raise ValueError(
            f"support_model must be one of {', '.join(SUPPORT_MODELS)}; got {chosen!r}"
        )
    return cast(SupportModel, chosen)


@dataclass(frozen=True)
class Route:
    """How one case is read: the reader's name and what the result should say about it."""

    reader: str
    note: str | None = None

    @property
    def details(self) -> dict[str, str]:
        """The reader fields of a result's details (``offline_model``, ``offline_model_is``
        and, with a note, ``language``)."""
        out = {"offline_model": self.reader, "offline_model_is": DESCRIPTIONS[self.reader]}
        if self.note:
            out["language"] = self.note
        return out

    def noted(self, text: str) -> str:
        """``text`` (a reason) with the route's note, if any, after it."""
        return text if self.note is None else f"{text} ({self.note})"


def reader_details(routes: Iterable[Route]) -> dict[str, str]:
    """The reader fields of a result scored by several routes (a session's interactions):
    each route's, with every reader named when there are several."""
    used = list(dict.fromkeys(routes))
    out = {k: v for r in used for k, v in r.details.items()}
    if len({r.reader for r in used}) > 1:
        out["offline_model"] = ", ".join(dict.fromkeys(r.reader for r in used))
    return out


def _multilingual(model: str) -> bool:
    """Whether the multilingual embedder is installed and ``model`` ships for it."""
    if multilingual_embedder() is None:
        return False
    try:
        load_model(model)
    except ValueError:
        return False
    return True


def support_route(english: bool, model: SupportModel, metric: str) -> Route:
    """The reader of a faithfulness case."""
    if english:
        return Route(model)
    if _multilingual("support_multilingual"):
        return Route("multilingual", "not English: read with the multilingual embedder")
    warn_english_only(metric)
    return Route(model, ENGLISH_ONLY.format(metric=metric))


def support_scorer(route: Route, embedder: Embedder) -> SupportScorer:
    """The function that scores a route's items."""
    if route.reader == "multilingual":
        other = multilingual_embedder()
        assert other is not None
        model = load_model("support_multilingual")
        return lambda items: score_support(items, other, model)
    if route.reader == "reader":
        return lambda items: score_support_reader(items, embedder)
    return lambda items: score_support(items, embedder)


def relevance_route(english: bool, metric: str) -> Route:
    """The reader of a relevance case."""
    if english:
        return Route("relevance")
    if _multilingual("relevance_multilingual"):
        return Route("relevance-multilingual", "not English: read with the multilingual embedder")
    warn_english_only(metric)
    return Route("relevance", ENGLISH_ONLY.format(metric=metric))


async def score_relevance_routed(
    items: Sequence[RelevanceItem], embedder: Embedder, route: Route
) -> list[RelevanceResult]:
    """:func:`~contextlens.offline.relevance.score_relevance` by ``route``'s reader."""
    if route.reader == "relevance-multilingual":
        other = multilingual_embedder()
        assert other is not None
        return await score_relevance(items, other, load_model("relevance_multilingual"))
    return await score_relevance(items, embedder)
