"""Training pairs for the claim reader: (claim, evidence window, allowed verdicts).

Verdicts are :data:`SUPPORTED`, :data:`CONTRADICTED` and :data:`NOT_MENTIONED`; a pair may
allow more than one (a claim people judged "not supported" is contradicted or not
mentioned, nobody said which), and the loss is then the probability of the set.

Made from the sentences of public contexts, with no model in the loop:

* supported: a sentence of the window as written, one of its clauses, two of its sentences
  fused, a word swapped for a synonym, a negative fact stated as its complement ("is not
  allowed" -> "is prohibited") and the reverse;
* contradicted: a sentence of the window with one fact changed: a negation added or
  removed, an antonym, a number, a unit, a date, a name (another of the window when it has
  one), a quantifier, two names swapped (who did what to whom), a condition flipped;
* not mentioned: a sentence of the same document outside the window, a sentence of another
  document, a supported sentence with a fact of elsewhere added to it.

Natural pairs come from the labelled sets (:mod:`_support_sources`): each claim of a reply
people judged supported, read against its window as the library reads it; the same claims
with one fact changed (contradicted: a paraphrase with a wrong fact); the one-claim replies
people judged unsupported (contradicted or not mentioned; "refutes" in Factcheck-GPT is
contradicted, "irrelevant" not mentioned).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from contextlens.offline.text import WORD, sentences

SUPPORTED, CONTRADICTED, NOT_MENTIONED = 0, 1, 2
VERDICTS = ("supported", "contradicted", "not mentioned")
#: Evidence words of a made window, at most (the library's windows hold about 75).
WINDOW_WORDS = 60


@dataclass(frozen=True)
class Pair:
    """One training pair: the claim, its window and the verdicts it allows (a bit set)."""

    claim: str
    window: str
    allowed: int  # bit v set: verdict v allowed
    kind: str
    group: str  # the source the pair was made from (held-out unit)


def bit(*verdicts: int) -> int:
    out = 0
    for v in verdicts:
        out |= 1 << v
    return out


# -- word lists ------------------------------------------------------------------------------

#: Pairs of opposites; either side replaces the other (a contradiction).
ANTONYMS = [
    ("covered", "excluded"),
    ("allowed", "prohibited"),
    ("permitted", "forbidden"),
    ("open", "closed"),
    ("increase", "decrease"),
    ("increases", "decreases"),
    ("increased", "decreased"),
    ("higher", "lower"),
    ("more", "less"),
    ("most", "least"),
    ("larger", "smaller"),
    ("largest", "smallest"),
    ("before", "after"),
    ("above", "below"),
    ("maximum", "minimum"),
    ("first", "last"),
    ("early", "late"),
    ("earlier", "later"),
    ("inside", "outside"),
    ("include", "exclude"),
    ("includes", "excludes"),
    ("included", "excluded"),
    ("accepted", "rejected"),
    ("accept", "reject"),
    ("win", "lose"),
    ("won", "lost"),
    ("north", "south"),
    ("east", "west"),
    ("northern", "southern"),
    ("eastern", "western"),
    ("male", "female"),
    ("men", "women"),
    ("hot", "cold"),
    ("warm", "cool"),
    ("high", "low"),
    ("long", "short"),
    ("longer", "shorter"),
    ("fast", "slow"),
    ("faster", "slower"),
    ("old", "young"),
    ("older", "younger"),
    ("oldest", "youngest"),
    ("heavy", "light"),
    ("rich", "poor"),
    ("strong", "weak"),
    ("safe", "dangerous"),
    ("legal", "illegal"),
    ("possible", "impossible"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("always", "never"),
    ("common", "rare"),
    ("rise", "fall"),
    ("rises", "falls"),
    ("rose", "fell"),
    ("gain", "loss"),
    ("positive", "negative"),
    ("public", "private"),
    ("true", "false"),
    ("success", "failure"),
    ("successful", "unsuccessful"),
    ("internal", "external"),
    ("upper", "lower"),
    ("top", "bottom"),
    ("left", "right"),
    ("start", "end"),
    ("begins", "ends"),
    ("began", "ended"),
    ("born", "died"),
    ("buy", "sell"),
    ("bought", "sold"),
    ("import", "export"),
    ("imports", "exports"),
    ("add", "remove"),
    ("added", "removed"),
    ("with", "without"),
    ("wet", "dry"),
    ("full", "empty"),
    ("cheap", "expensive"),
    ("cheaper", "more expensive"),
    ("easy", "difficult"),
    ("easier", "harder"),
    ("good", "bad"),
    ("better", "worse"),
    ("best", "worst"),
    ("available", "unavailable"),
    ("able", "unable"),
    ("likely", "unlikely"),
    ("increasing", "decreasing"),
    ("deep", "shallow"),
    ("wide", "narrow"),
    ("thick", "thin"),
    ("daily", "weekly"),
    ("weekly", "monthly"),
    ("morning", "evening"),
    ("day", "night"),
    ("summer", "winter"),
    ("spring", "autumn"),
    ("acute", "chronic"),
    ("benign", "malignant"),
    ("native", "foreign"),
    ("domestic", "international"),
    ("urban", "rural"),
    ("ancient", "modern"),
    ("arrested", "acquitted"),
    ("guilty", "innocent"),
    ("approved", "denied"),
    ("agreed", "refused"),
    ("confirmed", "denied"),
    ("supports", "opposes"),
    ("supported", "opposed"),
    ("allows", "prohibits"),
    ("encourages", "discourages"),
    ("raises", "lowers"),
    ("raised", "lowered"),
    ("enters", "leaves"),
    ("arrive", "depart"),
    ("arrived", "departed"),
    ("odd", "even"),
    ("majority", "minority"),
    ("plus", "minus"),
    ("profit", "loss"),
    ("refundable", "non-refundable"),
]
#: Words of one meaning; either side replaces the other (a supported rewording).
SYNONYMS = [
    ("buy", "purchase"),
    ("bought", "purchased"),
    ("big", "large"),
    ("small", "little"),
    ("begin", "start"),
    ("began", "started"),
    ("begins", "starts"),
    ("end", "finish"),
    ("help", "assist"),
    ("show", "demonstrate"),
    ("shows", "indicates"),
    ("use", "utilise"),
    ("uses", "employs"),
    ("used", "employed"),
    ("about", "approximately"),
    ("around", "roughly"),
    ("need", "require"),
    ("needs", "requires"),
    ("get", "obtain"),
    ("gets", "receives"),
    ("got", "received"),
    ("make", "produce"),
    ("makes", "produces"),
    ("made", "produced"),
    ("give", "provide"),
    ("gives", "provides"),
    ("gave", "provided"),
    ("find", "locate"),
    ("found", "discovered"),
    ("tell", "inform"),
    ("often", "frequently"),
    ("quickly", "rapidly"),
    ("fast", "quick"),
    ("important", "significant"),
    ("main", "principal"),
    ("mainly", "chiefly"),
    ("mostly", "largely"),
    ("also", "additionally"),
    ("but", "however"),
    ("because", "since"),
    ("therefore", "so"),
    ("rich", "wealthy"),
    ("enough", "sufficient"),
    ("whole", "entire"),
    ("entire", "complete"),
    ("near", "close to"),
    ("kids", "children"),
    ("child", "kid"),
    ("doctor", "physician"),
    ("car", "vehicle"),
    ("cars", "vehicles"),
    ("job", "position"),
    ("shop", "store"),
    ("shops", "stores"),
    ("people", "individuals"),
    ("area", "region"),
    ("areas", "regions"),
    ("town", "city"),
    ("country", "nation"),
    ("famous", "well-known"),
    ("known", "recognised"),
    ("called", "named"),
    ("located", "situated"),
    ("built", "constructed"),
    ("created", "established"),
    ("founded", "established"),
    ("died", "passed away"),
    ("allowed", "permitted"),
    ("forbidden", "prohibited"),
    ("cost", "price"),
    ("costs", "is priced at"),
    ("mistake", "error"),
    ("answer", "reply"),
    ("ask", "request"),
    ("try", "attempt"),
    ("tried", "attempted"),
    ("keep", "retain"),
    ("stop", "halt"),
    ("choose", "select"),
    ("chose", "selected"),
    ("happen", "occur"),
    ("happens", "occurs"),
    ("happened", "occurred"),
    ("live", "reside"),
    ("lives", "resides"),
    ("lived", "resided"),
    ("work", "function"),
    ("works", "functions"),
    ("illness", "disease"),
    ("sick", "ill"),
    ("medicine", "medication"),
    ("drug", "medication"),
    ("pain", "discomfort"),
    ("reduce", "lower"),
    ("reduces", "lowers"),
    ("increase", "raise"),
    ("increases", "raises"),
    ("before", "prior to"),
    ("after", "following"),
    ("during", "throughout"),
    ("within", "inside of"),
    ("every", "each"),
    ("many", "numerous"),
    ("several", "a number of"),
    ("usually", "typically"),
    ("generally", "in general"),
    ("currently", "at present"),
    ("now", "at present"),
    ("later", "subsequently"),
    ("whole", "full"),
]
#: Negative facts and the positive words that say them (complements, both directions).
COMPLEMENTS = [
    ("not covered", "excluded"),
    ("not allowed", "prohibited"),
    ("not permitted", "forbidden"),
    ("not available", "unavailable"),
    ("not open", "closed"),
    ("not required", "optional"),
    ("not possible", "impossible"),
    ("not legal", "illegal"),
    ("not answered", "unanswered"),
    ("not included", "excluded"),
    ("not accepted", "refused"),
    ("not safe", "unsafe"),
    ("not common", "rare"),
    ("not likely", "unlikely"),
    ("not known", "unknown"),
    ("not able", "unable"),
    ("not refundable", "non-refundable"),
    ("not married", "unmarried"),
    ("not the same", "different"),
    ("not visible", "invisible"),
    ("not necessary", "unnecessary"),
    ("not alive", "dead"),
    ("not present", "absent"),
    ("not successful", "unsuccessful"),
    ("not correct", "incorrect"),
    ("not complete", "incomplete"),
    ("not usual", "unusual"),
    ("does not include", "excludes"),
    ("did not win", "lost"),
    ("did not survive", "died"),
    ("is not free", "costs money"),
    ("not paid", "unpaid"),
    ("not approved", "rejected"),
]
#: Quantifiers and what replaces each (a contradiction).
QUANTIFIERS = {
    "all": ["some", "no", "few"],
    "every": ["no", "some"],
    "always": ["never", "rarely"],
    "never": ["always", "often"],
    "none": ["all", "most"],
    "some": ["all", "no"],
    "most": ["few", "none of the"],
    "many": ["few", "no"],
    "few": ["many", "most"],
    "only": ["also", "not only"],
    "both": ["neither", "only one of"],
    "everyone": ["no one"],
    "nobody": ["everybody"],
    "often": ["rarely", "never"],
    "rarely": ["often", "always"],
    "usually": ["rarely", "never"],
    "no": ["some", "all"],
}
#: Units and one another of the same kind (a contradiction).
UNITS = [
    ("days", "weeks"),
    ("weeks", "months"),
    ("months", "years"),
    ("hours", "minutes"),
    ("minutes", "seconds"),
    ("mg", "g"),
    ("milligrams", "grams"),
    ("grams", "kilograms"),
    ("kg", "lbs"),
    ("pounds", "kilograms"),
    ("km", "miles"),
    ("miles", "kilometers"),
    ("kilometers", "meters"),
    ("meters", "feet"),
    ("feet", "inches"),
    ("inches", "centimeters"),
    ("cm", "mm"),
    ("ml", "liters"),
    ("liters", "gallons"),
    ("percent", "times"),
    ("%", " times"),
    ("Celsius", "Fahrenheit"),
    ("dollars", "euros"),
    ("million", "billion"),
    ("billion", "million"),
    ("thousand", "million"),
    ("day", "week"),
    ("hour", "minute"),
    ("year", "month"),
    ("week", "month"),
    ("acres", "hectares"),
    ("calories", "grams"),
]
_MONTHS = "January February March April May June July August September October November December"
MONTHS = _MONTHS.split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_NUMBER = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)(?![\w.,]?\d)")
_AUX = re.compile(
    r"\b(is|are|was|were|has|have|had|can|will|does|do|did|should|could|would|may|must)"
    r"(\s+not\b|n't\b)?",
    re.IGNORECASE,
)
_CANNOT = re.compile(r"\bcannot\b", re.IGNORECASE)
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_CLAUSE = re.compile(r",\s+(?:and|but|while|which|whereas|although)\s+|;\s+|\s+but\s+")


def _table(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for a, b in pairs:
        out.setdefault(a, []).append(b)
        out.setdefault(b, []).append(a)
    return out


_ANTONYM = _table(ANTONYMS)
_SYNONYM = _table(SYNONYMS)
_UNIT = _table(UNITS)
_COMPLEMENT = _table(COMPLEMENTS)


def _words_of(table: dict[str, list[str]]) -> re.Pattern[str]:
    keys = sorted(table, key=len, reverse=True)
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w-])")


_ANTONYM_RE = _words_of(_ANTONYM)
_SYNONYM_RE = _words_of(_SYNONYM)
_UNIT_RE = re.compile(
    r"(?<=\d)\s?(" + "|".join(re.escape(k) for k in sorted(_UNIT, key=len, reverse=True)) + r")\b"
)
_COMPLEMENT_RE = _words_of(_COMPLEMENT)
_QUANT_RE = re.compile(r"\b(" + "|".join(QUANTIFIERS) + r")\b", re.IGNORECASE)
_MONTH_RE = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
_DAY_RE = re.compile(r"\b(" + "|".join(DAYS) + r")\b")

Rng = np.random.Generator


def _replace_one(
    text: str, pattern: re.Pattern[str], table: dict[str, list[str]], rng: Rng
) -> str | None:
    found = list(pattern.finditer(text))
    if not found:
        return None
    m = found[int(rng.integers(len(found)))]
    word = m.group(1)
    options = table.get(word) or table.get(word.lower())
    if not options:
        return None
    new = str(rng.choice(options))
    if word[:1].isupper():
        new = new[:1].upper() + new[1:]
    return text[: m.start(1)] + new + text[m.end(1) :]


# -- edits that keep the meaning -------------------------------------------------------------


def synonym(text: str, rng: Rng) -> str | None:
    out = text
    for _ in range(int(rng.integers(1, 3))):
        new = _replace_one(out, _SYNONYM_RE, _SYNONYM, rng)
        if new is None:
            break
        out = new
    return out if out != text else None


def complement(text: str, rng: Rng) -> str | None:
    found = list(_COMPLEMENT_RE.finditer(text))
    if not found:
        return None
    m = found[int(rng.integers(len(found)))]
    options = _COMPLEMENT[m.group(1)]
    new = str(rng.choice(options))
    return text[: m.start(1)] + new + text[m.end(1) :]


def clause(text: str, rng: Rng) -> str | None:
    parts = [p.strip(" ,;.") for p in _CLAUSE.split(text)]
    parts = [p for p in parts if len(WORD.findall(p)) >= 5]
    if len(parts) < 2:
        return None
    part = str(parts[int(rng.integers(len(parts)))])
    return part[:1].upper() + part[1:] + "."


def fuse(a: str, b: str) -> str:
    a, b = a.rstrip(" .;"), b.strip()
    lead = b[:1].lower() + b[1:] if b[:2] != b[:2].upper() else b
    return f"{a}, and {lead}"


# -- edits that change one fact --------------------------------------------------------------


def negation(text: str, rng: Rng) -> str | None:
    if m := _CANNOT.search(text):
        return text[: m.start()] + ("can" if m.group(0)[0] == "c" else "Can") + text[m.end() :]
    found = list(_AUX.finditer(text))
    if not found:
        return None
    m = found[0] if rng.random() < 0.6 else found[int(rng.integers(len(found)))]
    if m.group(2):
        return text[: m.start()] + m.group(1) + text[m.end() :]
    return text[: m.end()] + " not" + text[m.end() :]


def antonym(text: str, rng: Rng) -> str | None:
    return _replace_one(text, _ANTONYM_RE, _ANTONYM, rng)


def unit(text: str, rng: Rng) -> str | None:
    return _replace_one(text, _UNIT_RE, _UNIT, rng)


def quantifier(text: str, rng: Rng) -> str | None:
    found = list(_QUANT_RE.finditer(text))
    if not found:
        return None
    m = found[int(rng.integers(len(found)))]
    options = QUANTIFIERS[m.group(1).lower()]
    new = str(rng.choice(options))
    if m.group(1)[:1].isupper():
        new = new[:1].upper() + new[1:]
    return text[: m.start(1)] + new + text[m.end(1) :]


def date(text: str, rng: Rng) -> str | None:
    if m := _YEAR.search(text):
        year = int(m.group(1)) + int(rng.choice([-10, -3, -2, -1, 1, 2, 3, 5]))
        return text[: m.start()] + str(year) + text[m.end() :]
    for pattern, names in ((_MONTH_RE, MONTHS), (_DAY_RE, DAYS)):
        if m := pattern.search(text):
            other = [n for n in names if n != m.group(1)]
            return text[: m.start()] + str(rng.choice(other)) + text[m.end() :]
    return None


def number(text: str, rng: Rng) -> str | None:
    found = [m for m in _NUMBER.finditer(text) if not _YEAR.fullmatch(m.group(1))]
    if not found:
        return None
    m = found[int(rng.integers(len(found)))]
    raw = m.group(1)
    value = float(raw)
    if "." in raw:
        digits = len(raw.split(".")[1])
        new = f"{value * float(rng.choice([0.5, 1.5, 2.0, 3.0])):.{digits}f}"
    elif value < 20:
        new = str(int(value) + int(rng.choice([-2, -1, 1, 2, 3, 5])))
    else:
        new = str(round(value * float(rng.choice([0.5, 0.7, 1.3, 1.5, 2.0]))))
    if new == raw or new.startswith("-"):
        return None
    return text[: m.start()] + new + text[m.end() :]


def entity(text: str, window: str, pool: Sequence[str], rng: Rng) -> str | None:
    names = list(_NAME.finditer(text))
    if not names:
        return None
    m = names[int(rng.integers(len(names)))]
    own = {n.group(0) for n in names}
    near = sorted({n.group(0) for n in _NAME.finditer(window)} - own)
    choices = near if near and rng.random() < 0.7 else [p for p in pool if p not in own]
    if not choices:
        return None
    return text[: m.start()] + str(rng.choice(choices)) + text[m.end() :]


def roles(text: str, rng: Rng) -> str | None:
    names = list(_NAME.finditer(text))
    distinct = [m for i, m in enumerate(names) if m.group(0) not in {n.group(0) for n in names[:i]}]
    if len(distinct) < 2:
        return None
    a, b = distinct[0], distinct[1]
    return text[: a.start()] + b.group(0) + text[a.end() : b.start()] + a.group(0) + text[b.end() :]


EDITS: dict[str, Callable[[str, Rng], str | None]] = {
    "negation": negation,
    "antonym": antonym,
    "number": number,
    "unit": unit,
    "date": date,
    "quantifier": quantifier,
    "roles": roles,
}


def one_edit(text: str, window: str, pool: Sequence[str], rng: Rng) -> tuple[str, str] | None:
    """``text`` with one fact changed, by a kind drawn among those it allows: (kind, text)."""
    kinds = [*EDITS, "entity"]
    for kind in rng.permutation(kinds).tolist():
        out = entity(text, window, pool, rng) if kind == "entity" else EDITS[kind](text, rng)
        if out and out != text:
            return kind, out
    return None


# -- made pairs from documents ---------------------------------------------------------------


def _n_words(text: str) -> int:
    return len(WORD.findall(text))


def _usable(sentence: str) -> bool:
    n = _n_words(sentence)
    return 5 <= n <= 45 and not sentence.rstrip().endswith("?")


@dataclass(frozen=True)
class Document:
    """The sentences of one context and the source it comes from."""

    sentences: tuple[str, ...]
    group: str


def documents(texts: Iterable[tuple[str, str]]) -> list[Document]:
    """Each distinct (text, group) as its sentences (at most 400 kept of a long page)."""
    seen: set[str] = set()
    out = []
    for text, group in texts:
        if text in seen:
            continue
        seen.add(text)
        found = tuple(s for s in sentences(text) if s.strip())
        if found:
            out.append(Document(found[:400], group))
    return out


def _window(doc: Document, at: int, rng: Rng) -> tuple[str, list[int]]:
    """A window of consecutive sentences holding sentence ``at``, within the word budget."""
    chosen = [at]
    used = _n_words(doc.sentences[at])
    width = int(rng.choice([1, 2, 3, 4, 5], p=[0.15, 0.25, 0.25, 0.2, 0.15]))
    lo, hi = at, at
    while len(chosen) < width:
        grow = [i for i in (lo - 1, hi + 1) if 0 <= i < len(doc.sentences)]
        if not grow:
            break
        i = int(rng.choice(grow))
        n = _n_words(doc.sentences[i])
        if used + n > WINDOW_WORDS:
            break
        chosen.append(i)
        used += n
        lo, hi = min(lo, i), max(hi, i)
    chosen.sort()
    return " ".join(doc.sentences[i] for i in chosen), chosen


def made_pairs(docs: Sequence[Document], n: int, rng: Rng, names: Sequence[str]) -> list[Pair]:
    """About ``n`` made pairs from ``docs``, in the mix of :data:`MIX`."""
    out: list[Pair] = []
    usable = [(d, i) for d in docs for i, s in enumerate(d.sentences) if _usable(s)]
    if not usable:
        return out
    picks = rng.choice(len(usable), size=min(n, len(usable) * 3), replace=len(usable) < n)
    for k in picks.tolist():
        doc, at = usable[k]
        window, inside = _window(doc, at, rng)
        target = doc.sentences[at]
        pair = _made_one(doc, at, inside, window, target, docs, names, rng)
        if pair is not None:
            out.append(pair)
    return out


#: Share of each kind of made pair (drawn per sentence; a kind the sentence does not allow
#: falls to a copy or an edit).
MIX = {
    "copy": 0.04,
    "clause": 0.09,
    "fusion": 0.08,
    "synonym": 0.13,
    "complement": 0.04,
    "edit": 0.29,
    "outside": 0.14,
    "elsewhere": 0.04,
    "added": 0.15,
}


def _made_one(
    doc: Document,
    at: int,
    inside: list[int],
    window: str,
    target: str,
    docs: Sequence[Document],
    names: Sequence[str],
    rng: Rng,
) -> Pair | None:
    kind = str(rng.choice(list(MIX), p=np.array(list(MIX.values())) / sum(MIX.values())))
    g = doc.group
    sup, con, nm = bit(SUPPORTED), bit(CONTRADICTED), bit(NOT_MENTIONED)
    if kind == "clause" and (c := clause(target, rng)):
        return Pair(c, window, sup, "clause", g)
    if kind == "fusion" and len(inside) > 1:
        other = [i for i in inside if i != at and _usable(doc.sentences[i])]
        if other:
            j = int(rng.choice(other))
            a, b = (target, doc.sentences[j]) if at < j else (doc.sentences[j], target)
            return Pair(fuse(a, b), window, sup, "fusion", g)
    if kind == "synonym" and (s := synonym(target, rng)):
        return Pair(s, window, sup, "synonym", g)
    if kind == "complement" and (s := complement(target, rng)):
        return Pair(s, window, sup, "complement", g)
    if kind == "outside":
        far = [
            i
            for i in range(len(doc.sentences))
            if abs(i - at) > 2 and i not in inside and _usable(doc.sentences[i])
        ]
        if far:
            return Pair(doc.sentences[int(rng.choice(far))], window, nm, "outside", g)
        kind = "elsewhere"
    if kind == "elsewhere":
        other = docs[int(rng.integers(len(docs)))]
        if other is not doc:
            cand = [s for s in other.sentences if _usable(s)]
            if cand:
                return Pair(str(rng.choice(cand)), window, nm, "elsewhere", g)
    if kind == "added":
        other = doc if rng.random() < 0.6 else docs[int(rng.integers(len(docs)))]
        cand = [s for s in other.sentences if _usable(s) and s not in window and _n_words(s) < 25]
        if cand:
            return Pair(fuse(target, str(rng.choice(cand))), window, nm, "added", g)
    if kind in ("edit", "outside", "elsewhere", "added") or rng.random() < 0.5:
        edited = one_edit(target, window, names, rng)
        if edited is not None:
            base = synonym(edited[1], rng) if rng.random() < 0.3 else None
            return Pair(base or edited[1], window, con, f"edit:{edited[0]}", g)
    return Pair(target, window, sup, "copy", g)


def name_pool(docs: Sequence[Document], rng: Rng, k: int = 5000) -> list[str]:
    """Names found in the documents, for entity swaps with a name of elsewhere."""
    found = {m.group(0) for d in docs for s in d.sentences[:20] for m in _NAME.finditer(s)}
    names = sorted(found)
    if len(names) > k:
        names = [names[i] for i in rng.choice(len(names), size=k, replace=False)]
    return names
