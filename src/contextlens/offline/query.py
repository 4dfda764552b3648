"""Lexical features of a passage against a question, for the offline relevance scorer.

Cheap and regex-based: the question's terms and their rarity (:func:`profile`), whether a
passage has the rarest of them, how long it is (:func:`lexical_features`), and whether a
text has the kind of content the question word asks for (:func:`answer_cue`: a number for
"how many", a year for "when", "is a / refers to" for "what is" ...).

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


# --- what the question asks for -------------------------------------------------------------

_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "number",
        re.compile(
            r"\bhow (?:many|much|long|far|old|big|tall|often|fast|hot|cold|large|high|deep|"
            r"heavy|wide)\b|\b(?:cost|price|temperature|salary|population|calories|percent|"
            r"rate|number of|age|weight|height|length|distance|speed|size)\b",
            re.I,
        ),
    ),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month|century)\b", re.I)),
    ("person", re.compile(r"\bwho\b|\bwhom\b", re.I)),
    ("place", re.compile(r"\bwhere\b|\bwhat (?:country|city|state|continent)\b", re.I)),
    ("reason", re.compile(r"\bwhy\b|\bcaus|\breason|\beffects? of\b", re.I)),
    ("compare", re.compile(r"\bdifference\b|\bvs\.?\b|\bversus\b|\bcompared?\b", re.I)),
    ("procedure", re.compile(r"\bhow (?:to|do|does|can|is|are|should)\b|\bsteps?\b", re.I)),
    (
        "list",
        re.compile(
            r"\b(?:types|kinds|examples?|symptoms|what (?:are|can|foods?|types)|list)\b", re.I
        ),
    ),
    (
        "definition",
        re.compile(
            r"\b(?:define|definition|meaning|what is|what are|what does|what's|"
            r"used for|prescribed for)\b|_{2,}",
            re.I,
        ),
    ),
)

_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
#: What an answer of each kind looks like; matched on the lower-cased passage, except the
#: kinds in :data:`_CASED` (capitalised names), matched on the passage as written.
_CUES: dict[str, re.Pattern[str]] = {
    "number": re.compile(
        r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|"
        r"thirty|forty|fifty|hundred|thousand|million|billion|dozen|half|several)\b",
    ),
    "date": re.compile(rf"\b(?:1[0-9]|20)\d\d\b|\b{_MONTHS}\s+\d|\bcentury\b"),
    "person": re.compile(
        r"\b[A-Z][a-z]+ (?:[A-Z]\.? )?[A-Z][a-z]+\b|\b(?:[Hh]e|[Ss]he) (?:was|is)\b"
    ),
    "place": re.compile(
        r"\b(?:in|at|near|located|north|south|east|west|city|country|region)\b"
        r"(?:\s+\w+){0,2}\s+[A-Z][a-z]+",
    ),
    "reason": re.compile(
        r"\b(?:because|due to|caused? by|causes?|result(?:s|ed)? (?:in|from)|lead(?:s)? to|"
        r"led to|reasons?|since|trigger\w*|risk factors?)\b",
    ),
    "compare": re.compile(
        r"\b(?:whereas|while|unlike|compared|than|however|both|differ\w*|on the other hand)\b",
    ),
    "procedure": re.compile(
        r"\b(?:first|then|next|finally|step|use|using|by|add|place|make|take|process|"
        r"occurs?|when)\b",
    ),
    "list": re.compile(r"\b(?:include|includes|including|such as|types|e\.g\.|:)|,\s*\w+\s*,"),
    "definition": re.compile(
        r"\b(?:is|are) (?:a|an|the|any|defined|used|known|called)\b|\brefers? to\b|"
        r"\bdefined as\b|\bmeans?\b|\bknown as\b|\bis when\b|\bterm\b|\bused (?:to|for)\b",
    ),
}
_CASED = frozenset({"person", "place"})


def answer_types(question: str) -> tuple[str, ...]:
    """The kinds of answer ``question`` asks for, by question word ("how many" -> number)."""
    return tuple(name for name, pattern in _TYPES if pattern.search(question or ""))


@dataclass(frozen=True)
class QueryProfile:
    """A question's terms with their rarity weights, and the kinds of answer it asks for."""

    terms: tuple[str, ...]
    weights: np.ndarray  # rarity of each term
    types: tuple[str, ...]

    @property
    def rarest(self) -> str | None:
        return self.terms[int(np.argmax(self.weights))] if self.terms else None


@lru_cache(maxsize=4096)
def profile(question: str) -> QueryProfile:
    """The :class:`QueryProfile` of ``question`` (cached per distinct question)."""
    seen: dict[str, None] = {}
    for tok in tokens(question):
        if tok in STOPWORDS or tok in QUERY_FILLERS or len(tok) < 2:
            continue
        seen.setdefault(tok, None)
    terms = tuple(seen)
    weights = np.array([rarity(t) for t in terms], dtype=np.float64)
    return QueryProfile(terms, weights, answer_types(question))


#: Names of the lexical features, in the order :func:`lexical_features` returns them.
LEXICAL_FEATURES = (
    "rarest",  # 1 when the question's rarest term is in the passage
    "log_words",  # log(1 + words in the passage), words clipped to [MIN_WORDS, MAX_WORDS]
)
#: Passage lengths are clipped to the range the model was fitted on (MS MARCO passages).
MIN_WORDS, MAX_WORDS = 20, 150


def answer_cue(question: str, text: str) -> float:
    """The share of the answer kinds ``question`` asks for that ``text`` shows (0 if none)."""
    types = profile(question).types
    if not types:
        return 0.0
    low = text.lower()
    return sum(bool(_CUES[t].search(text if t in _CASED else low)) for t in types) / len(types)


def lexical_features(question: str, passage: str) -> list[float]:
    """The :data:`LEXICAL_FEATURES` of ``passage`` for ``question``."""
    prof = profile(question)
    seen, n_words = term_set(passage)
    log_words = math.log1p(min(max(n_words, MIN_WORDS), MAX_WORDS))
    rarest = prof.rarest
    return [float(rarest is not None and rarest in seen), log_words]
