"""Lexical features of a chunk against an input, for the offline relevance scorer.

Cheap and regex-based: the input's terms and their rarity (:func:`profile`), and
(:func:`lexical_features`) whether a chunk has the rarest of them, the rarity-weighted share
of them it has, how long it is, and how long the input is.

Rarity comes from the bundled embedder's WordPiece vocabulary
(``embeddings/assets/all-MiniLM-L6-v2/vocab.txt``): its whole-word entries are in order of
corpus frequency, so a word's rank there is a stand-in for its document frequency, and a
word that is not in it at all ("legionella", "sigmet") is rare. No word list is shipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import numpy as np

from contextlens.offline.text import STOPWORDS

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]|\d+(?:[.,:]\d+)*")
_VOCAB = "assets/all-MiniLM-L6-v2/vocab.txt"  # in contextlens.embeddings
#: Rank given to a word that is not a whole word of the vocabulary.
UNKNOWN_RANK = 40_000
#: Question words and fillers that say what is asked, not what it is about.
QUERY_FILLERS = frozenset(
    """define definition meaning mean means example examples type types kind kinds
    difference between vs versus describe explain called name list""".split()
)


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix stripper: "causes", "caused", "causing", "cause" -> "caus"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def tokens(text: str) -> list[str]:
    """Lower-cased, stemmed word and number tokens of ``text``, stop words included."""
    return [stem(w) for w in _TOKEN.findall((text or "").lower())]


def term_set(text: str) -> tuple[frozenset[str], int]:
    """The distinct stemmed tokens of ``text`` and its number of tokens (fast path)."""
    words = _TOKEN.findall((text or "").lower())
    return frozenset(stem(w) for w in set(words)), len(words)


def term_share(question: str, text: str) -> float:
    """The share of the question's terms (:func:`profile`) that ``text`` has."""
    terms = profile(question).terms
    if not terms:
        return 0.0
    seen, _ = term_set(text)
    return sum(t in seen for t in terms) / len(terms)


@cache
def _ranks() -> dict[str, int]:
    ranks: dict[str, int] = {}
    text = (resources.files("contextlens.embeddings") / _VOCAB).read_text(encoding="utf-8")
    words = text.splitlines()
    start = words.index("the") if "the" in words else 0
    for rank, word in enumerate(words[start:], 1):
        if word.isalpha():
            ranks.setdefault(word, rank)
            ranks.setdefault(stem(word), rank)
    return ranks


def rarity(term: str) -> float:
    """``log(rank)`` of ``term`` in the vocabulary's frequency order; high = rare."""
    return math.log(_ranks().get(term, UNKNOWN_RANK))


@dataclass(frozen=True)
class QueryProfile:
    """An input's terms with their rarity weights, and its number of words."""

    terms: tuple[str, ...]
    weights: np.ndarray  # rarity of each term
    words: int

    @property
    def rarest(self) -> str | None:
        return self.terms[int(np.argmax(self.weights))] if self.terms else None


@lru_cache(maxsize=4096)
def profile(question: str) -> QueryProfile:
    """The :class:`QueryProfile` of ``question`` (cached per distinct question)."""
    seen: dict[str, None] = {}
    words = tokens(question)
    for tok in words:
        if tok in STOPWORDS or tok in QUERY_FILLERS or len(tok) < 2:
            continue
        seen.setdefault(tok, None)
    terms = tuple(seen)
    weights = np.array([rarity(t) for t in terms], dtype=np.float64)
    return QueryProfile(terms, weights, len(words))


#: Names of the lexical features, in the order :func:`lexical_features` returns them.
LEXICAL_FEATURES = (
    "rarest",  # 1 when the input's rarest term is in the chunk
    "coverage",  # the rarity-weighted share of the input's terms that the chunk has
    "log_words",  # log(1 + words in the chunk), words clipped to [MIN_WORDS, MAX_WORDS]
    "query_words",  # log(words in the input), clipped to [MIN_QUERY_WORDS, MAX_QUERY_WORDS]
)
#: Chunk lengths are clipped to the range of the fitting data (MS MARCO passages).
MIN_WORDS, MAX_WORDS = 20, 150
#: Input lengths are clipped to the range of the fitting data (TREC queries: 2 to 9
#: words; HaluEval questions: 5 to 82, 99 % of them at most 53).
MIN_QUERY_WORDS, MAX_QUERY_WORDS = 2, 50


def query_words(question: str) -> float:
    """``log`` of the number of words of ``question``, clipped to the fitted range."""
    return math.log(min(max(profile(question).words, MIN_QUERY_WORDS), MAX_QUERY_WORDS))


def lexical_features(question: str, passage: str) -> list[float]:
    """The :data:`LEXICAL_FEATURES` of ``passage`` for ``question``."""
    prof = profile(question)
    seen, n_words = term_set(passage)
    log_words = math.log1p(min(max(n_words, MIN_WORDS), MAX_WORDS))
    rarest = prof.rarest
    total = float(prof.weights.sum())
    coverage = (
        sum(w for t, w in zip(prof.terms, prof.weights.tolist(), strict=True) if t in seen) / total
        if total > 0
        else 0.0
    )
    has_rarest = float(rarest is not None and rarest in seen)
    return [has_rarest, coverage, log_words, query_words(question)]
