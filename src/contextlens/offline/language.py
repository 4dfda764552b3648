"""Whether a case is in English: the offline scorers' features read English words.

A case is not English when the caller says so (gaussia's ``Dataset.language``: "english",
"en", "en-GB" are English; "german", "de", "français" are not) or when its text does not
read as English: English prose is about a third function words ("the", "of", "is",
...), and other languages, even in Latin script, have few of them. A case is read as
English when any of its texts long enough to tell (:data:`MIN_WORDS` words) reads as
English, so a noisy web page does not outvote an English reply.

Per text, :func:`language_of` names the language a text is in: another script by its
letters, a Latin-script language (German, French, Spanish, Italian, Portuguese, Dutch) by its
function words outnumbering the English ones; a text that reads as none of them (a table, a
list of names) is not told. :func:`unread_texts` lists the texts of a case that the English
reader does not read, for the per-case note of :class:`Unread`.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

_LETTERS = re.compile(r"[^\W\d_]+")
#: English function words: frequent in any English text, rare as words of other languages.
_FUNCTION = frozenset(
    """a the of and to in is are was were be been has have had it this that these those with
    for on at by from as an or not but which who what when where how there their they you your
    we our he she his her its will would can could should do does did than then so if all any
    some more most no only also into about after before over under between during while""".split()
)
#: Function words of the Latin-script languages told apart from English (accents kept).
_OTHER_FUNCTION = {
    "German": frozenset(
        """der die das und ist nicht ein eine einen einem einer zu den von mit sich des auf für
        im dem auch es an werden aus er hat dass sie nach wird bei um am sind noch wie über so
        zum war haben nur oder aber vor zur bis mehr durch man kann können ich wir ihr ihnen
        sie dazu keine kein leider wenn ob nein ja innerhalb ab ihre ihr seine unsere unser
        diese dieser gibt wurde wurden sehr schon hier dann mir mich uns bitte wo""".split()
    ),
    "French": frozenset(
        """le la les de des du un une et est en que qui dans pour pas au aux ce il elle sur se
        ne plus par avec son sa ses sont nous vous ou mais été être cette leur je tu ces très
        peut sans aussi d l n qu c j""".split()
    ),
    "Spanish": frozenset(
        """el la los las de del y en que un una es por con no para se su al lo como más pero sus
        le ya o este sí porque esta entre cuando muy sin sobre también me hasta hay donde
        puede están son usted""".split()
    ),
    "Italian": frozenset(
        """il lo la gli le di da del della dei delle e è che un una per con non si sono ma nel
        nella anche come più questo questa può essere al alla ha hanno""".split()
    ),
    "Portuguese": frozenset(
        """o os a as de do da dos das e é que um uma para com não em no na por se mais mas
        como ao aos foi são pode também você""".split()
    ),
    "Dutch": frozenset(
        """de het een en van is dat niet op te in met voor zijn er maar ook als bij aan om
        worden wordt kan u je ik we hun deze dit geen naar""".split()
    ),
}
#: English function words beyond :data:`_FUNCTION`, so that a short English text is not
#: taken for another language it shares a word with ("My mother met Elvis").
_ENGLISH_MORE = frozenset("i my me am yes here just very up out one him them us me".split())
#: English contractions taken off before counting ("it's" is not French "s").
_CONTRACTION = re.compile(r"['\u2019](?:s|d|t|ll|re|ve|m)\b")
#: Another language's own function words (not English ones) a text must hold, each
#: counted once, to be told as that language: names such as "de la Cueva" or "van Gogh"
#: hold one or two.
MIN_OWN_WORDS = 3
#: A text whose letters are mostly (more than this share) of another script is in it.
MIN_SCRIPT_SHARE = 0.5
#: The scripts named in notes, by the first word of their letters' Unicode names.
_SCRIPTS = {
    "CYRILLIC": "Cyrillic script",
    "GREEK": "Greek",
    "ARABIC": "Arabic script",
    "HEBREW": "Hebrew",
    "CJK": "Chinese characters",
    "HIRAGANA": "Japanese",
    "KATAKANA": "Japanese",
    "HANGUL": "Korean",
    "DEVANAGARI": "Devanagari script",
    "THAI": "Thai",
}
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


@lru_cache(maxsize=8192)
def language_of(text: str) -> str | None:
    """The language ``text`` (its first 20,000 characters) is in: ``"English"``, another
    language or script by name (``"German"``, ``"Cyrillic script"``), or None when it cannot
    be told (under :data:`MIN_WORDS` words, or no language's function words stand out)."""
    words = _LETTERS.findall(_CONTRACTION.sub("", text[:20_000].lower()))
    letters = "".join(words)
    foreign = [c for c in letters if not c.isascii()]
    if len(foreign) >= MIN_WORDS and len(foreign) > MIN_SCRIPT_SHARE * len(letters):
        named = [s for s in map(_script, foreign) if s is not None]
        if len(named) * 2 >= len(foreign):
            return max(set(named), key=named.count)
    if len(words) < MIN_WORDS:
        return None
    english = sum(w in _FUNCTION or w in _ENGLISH_MORE for w in words)
    found = {"English": english}
    for name, function in _OTHER_FUNCTION.items():
        own = {w for w in words if w in function and w not in _FUNCTION and len(w) > 1}
        if len(own) >= MIN_OWN_WORDS:  # initials ("D.", "L.") are no French
            found[name] = sum(w in function and len(w) > 1 for w in words)
    best = max(found, key=lambda name: found[name])
    if found[best] < MIN_FUNCTION_SHARE * len(words):
        return None
    if best != "English" and found[best] <= english:
        return "English"  # a tie goes to English: the words are shared
    return best


def _script(char: str) -> str | None:
    try:
        return _SCRIPTS.get(unicodedata.name(char).split()[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class Unread:
    """The texts of a case that the English offline reader does not read: each as
    ``(what, language)`` (``("the answer", "German")``, ``("retrieval_context[2]",
    "French")``)."""

    texts: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.texts)

    def has(self, what: str) -> bool:
        """Whether the text called ``what`` is one of them."""
        return any(w == what for w, _ in self.texts)

    def says(self) -> str:
        """``the answer is in German; retrieval_context[0] and retrieval_context[2] are in
        French``: the texts grouped by language."""
        by_language: dict[str, list[str]] = {}
        for what, name in self.texts:
            by_language.setdefault(name, []).append(what)
        parts = []
        for name, whats in by_language.items():
            shown = whats if len(whats) <= 3 else [*whats[:3], f"{len(whats) - 3} more"]
            joined = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
            parts.append(f"{joined} {'is' if len(whats) == 1 else 'are'} in {name}")
        return "; ".join(parts)

    def needs_judge(self) -> str:
        """Why an item the English reader cannot read is not scored offline."""
        return (
            f"not applicable: needs a judge ({self.says()}, which the offline scorer does not read)"
        )

    def note(self, metric: str, multilingual: bool = False) -> str:
        """The case's note: which texts are in which language, and what the reader did."""
        if multilingual:
            return f"{self.says()}: read with the multilingual embedder"
        return (
            f"{self.says()}, and the offline scorer reads English only; give {metric} an LLM "
            "judge to score such cases"
        )


def unread_texts(texts: Iterable[tuple[str, str | None]], language: str | None = None) -> Unread:
    """The texts of a case, each ``(what, text)``, that are not in English: those that read
    as another language (:func:`language_of`), or every one when the case declares a
    language other than English (``language``)."""
    declared = declared_english(language)
    found: list[tuple[str, str]] = []
    for what, text in texts:
        if not text or not text.strip():
            continue
        if declared is False:
            given = (language or "").strip()
            found.append((what, given.capitalize() if len(given) > 3 else given))
            continue
        name = language_of(text)
        if name is not None and name != "English":
            found.append((what, name))
    return Unread(tuple(found))


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
