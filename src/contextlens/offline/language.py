"""Whether a case is in English: the offline scorers' features read English words.

A case is not English when the caller says so (gaussia's ``Dataset.language``: "english",
"en", "en-GB" are English; "german", "de", "français" are not) or when its text does not
read as English: English prose is about a third function words ("the", "of", "is",
...), and other languages, even in Latin script, have few of them. A case is read as
English when any of its texts long enough to tell (:data:`MIN_WORDS` words) reads as
English, so a noisy web page does not outvote an English reply.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from functools import lru_cache

_LETTERS = re.compile(r"[^\W\d_]+")
#: English function words: frequent in any English text, rare as words of other languages.
_FUNCTION = frozenset(
    """a the of and to in is are was were be been has have had it this that these those with
    for on at by from as an or not but which who what when where how there their they you your
    we our he she his her its will would can could should do does did than then so if all any
    some more most no only also into about after before over under between during while""".split()
)
_ENGLISH_NAMES = frozenset({"en", "eng", "english", "anglais", "inglés", "englisch"})
#: Below this many words a text is taken as English.
MIN_WORDS = 4
#: English prose has well over this share of function words; other languages well under.
MIN_FUNCTION_SHARE = 0.12
#: A text with more than this share of letters outside ASCII is not English.
MAX_NON_ASCII = 0.2


def declared_english(language: str | None) -> bool | None:
    """True or False for a declared language, None when nothing is declared."""
    if language is None or not language.strip():
        return None
    tag = language.strip().lower().replace("_", "-").split("-")[0]
    return tag in _ENGLISH_NAMES


@lru_cache(maxsize=4096)
def looks_english(text: str) -> bool | None:
    """Whether ``text`` reads as English; None when it is too short to tell."""
    words = _LETTERS.findall(text.lower())
    letters = "".join(words)
    foreign = sum(not c.isascii() for c in letters)
    if foreign >= MIN_WORDS and foreign > MAX_NON_ASCII * len(letters):
        return False  # another script, or a language rich in accents
    if len(words) < MIN_WORDS:
        return None
    return sum(w in _FUNCTION for w in words) >= MIN_FUNCTION_SHARE * len(words)


def is_english(texts: Iterable[str], language: str | None = None) -> bool:
    """A case is English unless declared otherwise, or unless none of its texts (each up to
    20,000 characters; the reply, the context, ...) that is long enough to tell reads as
    English."""
    if declared_english(language) is False:
        return False
    verdicts = [looks_english(t[:20_000]) for t in texts if t]
    told = [v for v in verdicts if v is not None]
    return any(told) or not told


_warned: set[str] = set()


def warn_english_only(metric: str) -> None:
    """Warn once per metric name that its offline scorer read a non-English case as English."""
    if metric in _warned:
        return
    _warned.add(metric)
    warnings.warn(ENGLISH_ONLY.format(metric=metric), UserWarning, stacklevel=3)


ENGLISH_ONLY = (
    "{metric}: a case is not in English, and the offline scorer reads English only (its "
    "embedder and word features are English); give the metric an LLM judge to score such "
    "cases"
)
