"""Small text utilities for the offline algorithms: sentences, words, stems, numbers."""

from __future__ import annotations

import re
from functools import lru_cache

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
#: A word (letters, inner apostrophes and hyphens) or a number (``1,000.5``, ``9:30``).
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+(?:[.,:]\d+)*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
#: A piece ending in an abbreviation or an initial ("William O.") goes on in the next one.
_ABBREV = re.compile(
    r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|vs|etc|e\.g|i\.e|Inc|Ltd|No|approx)\.$"
    r"|(?<![\w.])(?-i:[A-Z])\.$",
    re.I,
)

#: Enough of a piece's end for ``_ABBREV``: its longest match ("approx.", 7) and the
#: characters that decide its leading ``\b``.
_ABBREV_TAIL = 9

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just let me more most my myself nor of off on once only or other ought our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves yes ok okay sure well also really oh hi hello thanks thank please anything
    else help glad happy i'm it's we're you're that's there's don't can't won't i've i'd""".split()
)


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences and list items; blank pieces are dropped."""
    pieces: list[str] = []
    for chunk in _SENTENCE_END.split(text or ""):
        chunk = _BULLET.sub("", chunk).strip()
        if not chunk:
            continue
        if pieces and _ABBREV.search(pieces[-1][-_ABBREV_TAIL:]):
            pieces[-1] = f"{pieces[-1]} {chunk}"
        else:
            pieces.append(chunk)
    return pieces


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """``word`` without a plural or verb ending (``-ing``, ``-ed``, ``-es``, ``-s``)."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def numbers(text: str) -> set[str]:
    """The numbers in ``text``, normalised (``"1,000"`` -> ``"1000"``, ``"24/7"`` -> 24, 7)."""
    return {form for match in _NUMBER.finditer(text) for form in number_forms(match.group(0))}


@lru_cache(maxsize=1 << 14)
def number_forms(token: str) -> tuple[str, ...]:
    """The normal forms of one number as written (``"9:30"`` -> 9 and 9:30, ``"09:00"`` -> 9)."""
    token = token.replace(",", "")
    if ":" in token:  # a time: 9:00 -> 9
        hours, _, minutes = token.partition(":")
        hour = hours.lstrip("0") or "0"
        return (hour, token) if minutes.strip("0") else (hour,)
    if "." in token:
        token = token.rstrip("0").rstrip(".")
    return (token.lstrip("0") or "0",)


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")
