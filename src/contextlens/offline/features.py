"""Features of a reply's claims against their evidence, for the offline support model.

Every claim (reply sentence) is aligned with its most similar evidence sentence (cosine of
the embeddings, computed once by the caller). Per claim we measure, with regular
expressions and set arithmetic only:

- ``sim``: cosine similarity to the aligned evidence sentence;
- ``overlap_aligned`` / ``overlap_context``: share of the claim's content words found in the
  aligned sentence / anywhere in the evidence;
- ``bigram_share``: share of the claim's word pairs (its word, for a one-word claim) found
  in the evidence, i.e. wording taken over as is (an opening "Yes," or "Sure," left out);
- ``grounded``: the larger of ``sim`` and ``bigram_share``: a short fragment quoted from a
  long sentence has a low cosine but is fully grounded;
- ``novel_noun_share`` / ``novel_noun_frac``: noun-like words (not ending like a verb,
  participle or adverb) found nowhere in the evidence, as a share of the claim's noun-like
  words / of its content words found nowhere in the evidence;
- ``novel_names``: capitalised words (names, places, brands) found nowhere in the evidence
  (Mon matches Monday, GANs matches GAN, AI-based needs only AI);
- ``new_numbers``: numbers (digits, or number words up to ninety) found nowhere in the
  evidence;
- ``number_mismatch``: the claim has a number the aligned sentence lacks while that
  sentence has numbers of its own (a changed figure rather than an added one);
- ``negation_mismatch``: exactly one of claim and aligned sentence is negated;
- ``content_words`` / ``content_found``: the claim's content words, and how many of them are
  anywhere in the evidence (pooled over a reply's claims into ``word_share``);
- ``antonym``: the claim uses a word whose opposite (more/less, before/after, ~260 listed
  pairs, or the word with/without un-, in-, dis-, non-) is in the aligned sentence and the
  word itself is not.

Reply length is deliberately not a feature.

:func:`aggregate_many` turns the claims of each reply into a row of :data:`CANDIDATES` (the
weakest claim's, the mean, the most, the share of the reply's content words found in the
evidence, ...); a single claim aggregates to its own values, so the same model scores a claim
and a whole reply. The bundled model takes :data:`FEATURES`, chosen on held-out sources by
``benchmarks/select_support.py``: the mean cosine of the claims with their closest evidence
sentences, the numbers found nowhere in the evidence, and the share of content words found.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain, pairwise

import numpy as np

from contextlens.offline.text import STOPWORDS, WORD, number_forms, stem

#: Per-claim raw measurements, in column order of :func:`claim_row`.
CLAIM_COLUMNS = (
    "sim",
    "overlap_aligned",
    "overlap_context",
    "bigram_share",
    "grounded",
    "novel_noun_share",
    "novel_noun_frac",
    "novel_names",
    "new_numbers",
    "number_mismatch",
    "negation_mismatch",
    "antonym",
    "content_words",
    "content_found",
)

#: Every reply feature the extractor computes (per reply; see :func:`aggregate_many`), the
#: candidates ``benchmarks/select_support.py`` chooses the model's inputs among.
CANDIDATES = (
    "sim_min",
    "sim_mean",
    "overlap_aligned_min",
    "overlap_aligned_mean",
    "overlap_context_min",
    "bigram_share_min",
    "bigram_share_mean",
    "grounded_min",
    "grounded_mean",
    "novel_noun_share_max",
    "novel_noun_frac_max",
    "log_novel_names",
    "log_new_numbers",
    "number_mismatch",
    "negation_mismatch",
    "antonym",
    "word_share",
)

#: The bundled model's inputs, in order: the candidates that carried over to unseen sources.
FEATURES = ("sim_mean", "log_new_numbers", "word_share")

#: The direction each feature may push support (+1 up, -1 down): more similarity or shared
#: words never make a reply less faithful, more unsupported material never more faithful.
#: The fit keeps every coefficient on its side (or zero).
DIRECTION = {
    f: (1 if f.startswith(("sim", "overlap", "bigram", "grounded", "word")) else -1)
    for f in CANDIDATES
}

_C = {name: i for i, name in enumerate(CLAIM_COLUMNS)}

_NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor without cannot dont doesnt didnt isnt wasnt"
    " arent werent cant wont couldnt shouldnt wouldnt havent hasnt hadnt".split()
)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero - two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
    if w != "-"  # "one" is a pronoun as often as a number
} | {
    w: str(10 * i)
    for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)
}

#: Endings of verbs, participles and adverbs: words a paraphrase swaps freely, unlike nouns.
_VERBISH = re.compile(r"(?:ly|ing|ed|[iy][sz]e[sd]?|ate[sd]?|en)$")
_NAME = re.compile(r"\b[A-Z][A-Za-z'-]+")
_OPENERS = frozenset('.!?:;"([\n')


def _opens(text: str, start: int) -> bool:
    """The word at ``start`` opens the text, a sentence, a quote or a bracket."""
    before = text[:start].rstrip(" \t")
    return not before or before[-1] in _OPENERS


#: Pairs of opposites: a claim using one where its closest sentence has the other.
_OPPOSITES = """
more/less more/fewer most/least higher/lower high/low increase/decrease increase/reduce
increased/decreased increased/reduced increasing/decreasing increases/decreases
rise/fall rose/fell rising/falling up/down above/below over/under before/after
first/last early/late earlier/later gain/loss gains/losses gained/lost win/lose won/lost
include/exclude including/excluding included/excluded accept/reject accepted/rejected
agree/disagree agreed/disagreed positive/negative strong/weak stronger/weaker
large/small larger/smaller big/small bigger/smaller best/worst better/worse open/closed
open/close opened/closed start/end started/ended begin/end buy/sell bought/sold
buying/selling buyer/seller profit/loss success/failure successful/unsuccessful
always/never all/none male/female man/woman men/women husband/wife boy/girl
father/mother son/daughter brother/sister old/new old/young older/younger
oldest/youngest true/false easy/difficult easy/hard easier/harder like/dislike love/hate
liked/disliked add/remove added/removed allow/prevent allow/forbid allowed/banned
allowed/prohibited support/oppose supported/opposed supports/opposes cheap/expensive
cheaper/costlier long/short longer/shorter same/different similar/different
visual/auditory visual/verbal semantic/syntactic input/output inside/outside
internal/external domestic/foreign domestic/international public/private north/south
east/west northern/southern eastern/western left/right top/bottom front/back hot/cold
warm/cool wet/dry light/dark day/night morning/evening summer/winter spring/autumn
fast/slow faster/slower quick/slow quickly/slowly rich/poor wealthy/poor happy/sad
happy/unhappy good/bad good/poor positive/critical safe/dangerous safe/unsafe
legal/illegal possible/impossible likely/unlikely able/unable known/unknown major/minor
majority/minority maximum/minimum max/min upper/lower senior/junior full/empty
full/partial present/absent alive/dead live/die born/died win/defeat victory/defeat
winner/loser pass/fail passed/failed approve/reject approved/rejected approve/deny
approved/denied confirm/deny confirmed/denied admit/deny admitted/denied arrive/leave
arrived/left enter/exit import/export imports/exports lend/borrow lent/borrowed
give/take gave/took send/receive sent/received push/pull hire/fire hired/fired
join/leave joined/left attack/defend offense/defense guilty/innocent ally/enemy
friend/enemy friends/enemies simple/complex simple/complicated cause/prevent
increase/cut raise/cut raised/cut raise/lower raised/lowered expand/shrink
expanded/shrank growth/decline grow/decline grew/declined grow/shrink grew/shrank
improve/worsen improved/worsened improvement/decline surplus/deficit credit/debit
asset/liability assets/liabilities income/expense revenue/cost revenues/costs up/flat
strengthen/weaken strengthened/weakened boost/hurt ahead/behind optimistic/pessimistic
bullish/bearish upgrade/downgrade upgraded/downgraded overestimate/underestimate
above/beneath rural/urban modern/ancient modern/traditional formal/informal
permanent/temporary heavy/light thick/thin wide/narrow deep/shallow tall/short near/far
close/distant cheap/costly quiet/loud silent/loud clean/dirty sick/healthy weak/powerful
accurate/inaccurate correct/incorrect right/wrong real/fake real/fictional
natural/artificial human/machine online/offline manual/automatic manually/automatically
supervised/unsupervised explicit/implicit explicitly/implicitly direct/indirect
directly/indirectly local/global locally/globally encode/decode encoder/decoder
training/test train/test maximize/minimize maximizing/minimizing increase/lower
""".split()
ANTONYMS: dict[str, frozenset[str]] = {}
for _a, _b in (pair.split("/") for pair in _OPPOSITES):
    ANTONYMS[_a] = ANTONYMS.get(_a, frozenset()) | {_b}
    ANTONYMS[_b] = ANTONYMS.get(_b, frozenset()) | {_a}


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a synchronous block of feature extraction.

    Text features allocate many small containers, none in a reference cycle, and keep the
    distinct ones in memos; collections triggered by those allocations walk the whole heap
    again and again and take about half the time. Reference counting still frees
    everything; the collector's previous state is restored on exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class TextFacts:
    """What the features need from one text, computed once per distinct text."""

    words: frozenset[str]
    tokens: frozenset[str]
    numbers: frozenset[str]
    nouns: frozenset[str]
    bigrams: frozenset[str]
    negated: bool

    @cached_property
    def unprefixed(self) -> frozenset[str]:
        """The tokens without a negating prefix (only an aligned sentence needs them)."""
        return frozenset(u for t in self.tokens for u in _unprefixed(t))


_Word = tuple[str, str, str | None, str | None, bool, tuple[str, ...]]


def _scan(text: str) -> tuple[list[_Word], int]:
    """The :func:`_word` of each word and number of ``text``, then of each part of its
    hyphenated words; and how many come before the parts."""
    raws = WORD.findall(text.replace("\u2019", "'"))
    n = len(raws)
    if "-" in text:
        raws += [part for raw in raws if "-" in raw for part in raw.split("-") if part]
    return list(map(_word, raws)), n


@lru_cache(maxsize=8192)
def facts(text: str) -> TextFacts:
    """Content words, lower-cased tokens, numbers and negation of ``text`` (memoised: a
    context seen again costs a look-up)."""
    info, n = _scan(text)
    if not info:
        return _NO_FACTS
    lows, toks, contents, nouns, negations, forms = zip(*info, strict=True)
    return TextFacts(
        words=frozenset(filter(None, contents)),  # a number has no word, token or noun
        tokens=frozenset(filter(None, toks)),
        numbers=frozenset(chain.from_iterable(forms)),
        nouns=frozenset(filter(None, nouns)),
        bigrams=frozenset(_pairs(lows[:n])),  # as written, not the hyphenated words' parts
        negated=any(negations),
    )


#: Acknowledgements and greetings: "Yes, free shipping ..." takes its wording from
#: "Free shipping ..." as much as the bare statement does.
_ACKNOWLEDGEMENTS = frozenset("yes ok okay sure well oh hi hello thanks".split())


def _pairs(words: Sequence[str]) -> Iterator[str]:
    """Successive word pairs as ``"first second"``, acknowledgements left out (strings,
    which the cyclic garbage collector need not track, unlike tuples)."""
    return map(" ".join, pairwise(w for w in words if w not in _ACKNOWLEDGEMENTS))


_NO_FACTS = TextFacts(frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), False)


def joint_facts(sentences: tuple[str, ...]) -> TextFacts:
    """The words, tokens, numbers and word pairs of several sentences together, in one pass
    over their words (pairs stay within a sentence). The same sets as the union of each
    sentence's :func:`facts`; ``nouns`` and ``negated`` are left empty."""
    words: set[str] = set()
    tokens: set[str] = set()
    numbers: set[str] = set()
    bigrams: set[str] = set()
    for sentence in sentences:
        info, n = _scan(sentence)
        if not info:
            continue
        lows, toks, contents, _, _, forms = zip(*info, strict=True)
        words.update(filter(None, contents))
        tokens.update(filter(None, toks))
        numbers.update(chain.from_iterable(forms))
        bigrams.update(_pairs(lows[:n]))
    return TextFacts(
        words=frozenset(words),
        tokens=frozenset(tokens),
        numbers=frozenset(numbers),
        nouns=frozenset(),
        bigrams=frozenset(bigrams),
        negated=False,
    )


@lru_cache(maxsize=1 << 16)
def _word(raw: str) -> _Word:
    """(lower-cased, token, content-word stem, noun-like stem, negation, number forms) of one
    word or number; the content-word stem is the lower-cased word without stop words,
    stemmed; a number word (twenty) has its figure as number form."""
    low = raw.lower()
    if raw[0].isdigit():
        return low, "", None, None, False, number_forms(raw)
    bare = low.strip("'-")
    if raw[0].isupper() and bare in _ABBREVIATIONS:  # Mon -> monday, Sept -> september
        bare = _ABBREVIATIONS[bare]
    token = _norm(raw) if bare not in _ABBREVIATIONS.values() else bare
    content = stem(bare) if bare and bare not in STOPWORDS else None
    noun = (
        stem(token)
        if token not in STOPWORDS and len(token) > 1 and not _VERBISH.search(token)
        else None
    )
    figure = _NUMBER_WORDS.get(token)
    return (
        low,
        token,
        content,
        noun,
        token in _NEGATIONS or token.endswith("n't"),
        (figure,) if figure else (),
    )


_ABBREVIATIONS = {
    "mon": "monday",
    "tue": "tuesday",
    "tues": "tuesday",
    "wed": "wednesday",
    "thu": "thursday",
    "thur": "thursday",
    "thurs": "thursday",
    "fri": "friday",
    "sat": "saturday",
    "sun": "sunday",
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}


def _known(name: str, shown: str, tokens: frozenset[str] | set[str]) -> bool:
    """A name is in ``tokens``: as is, abbreviated (Mon), as a plural acronym (GANs), or, when
    hyphenated (AI-based, Mon-Fri), each of its capitalised parts."""
    if name in tokens:
        return True
    parts = [p for p in shown.split("-") if p[:1].isupper()] or [shown]
    for part in parts:
        if _ACRONYMS.fullmatch(part):
            part = part[:-1]
        low = part.lower()
        if _ABBREVIATIONS.get(low, low) not in tokens:
            return False
    return True


_ACRONYMS = re.compile(r"[A-Z]{2,}s")


def _norm(token: str) -> str:
    token = token.lower().strip("'-")
    return token[:-2] if token.endswith("'s") else token


def names(text: str) -> dict[str, str]:
    """Capitalised words not opening a sentence (names, places, brands), normalised: as written."""
    return {
        _norm(m.group(0)): m.group(0).strip("'-").removesuffix("'s")
        for m in _NAME.finditer(text)
        if m.group(0) != "I" and not _opens(text, m.start())
    }


@dataclass(frozen=True)
class ClaimDetail:
    """The words behind a claim's features, for explanations."""

    new_numbers: tuple[str, ...]
    new_names: tuple[str, ...]
    negation_mismatch: bool
    antonyms: tuple[str, ...]


def claim_row(
    claim: str,
    claim_facts: TextFacts,
    sim: float,
    aligned: TextFacts,
    evidence: TextFacts,
    given: TextFacts | None = None,
) -> tuple[list[float], ClaimDetail]:
    """The raw measurements of one claim (see :data:`CLAIM_COLUMNS`) and their words.

    ``aligned``: the facts of the claim's closest evidence sentence; ``evidence``: those of
    all the evidence (:func:`joint_facts`). ``given``: the facts of the user's question. Its
    words, names and numbers are not new content when the reply repeats them ("a $30
    order" for "Is shipping free for a $30 order?"), but they support nothing: the overlap
    and closeness columns ignore them.
    """
    words = claim_facts.words
    n = len(words)
    known_words, known_tokens, known_numbers = evidence.words, evidence.tokens, evidence.numbers
    if given is not None:
        known_words = known_words | given.words
        known_tokens = known_tokens | given.tokens
        known_numbers = known_numbers | given.numbers
    novel = words - known_words
    nouns = claim_facts.nouns
    novel_nouns = nouns - known_words
    new_nums = _sorted(claim_facts.numbers - known_numbers)
    new_names = _sorted(
        shown for w, shown in names(claim).items() if not _known(w, shown, known_tokens)
    )
    changed_number = bool(aligned.numbers) and bool(claim_facts.numbers - aligned.numbers)
    negation = claim_facts.negated != aligned.negated
    flipped = _sorted(t for t in claim_facts.tokens - aligned.tokens if _opposed(t, aligned))
    copied = _share_found(claim_facts, evidence)
    row = [
        sim,
        len(words & aligned.words) / n if n else 1.0,
        len(words & evidence.words) / n if n else 1.0,
        copied,
        max(sim, copied),
        len(novel_nouns) / len(nouns) if nouns else 0.0,
        len(novel_nouns) / len(novel) if novel else 0.0,
        float(len(new_names)),
        float(len(new_nums)),
        float(changed_number),
        float(negation),
        float(bool(flipped)),
        float(n),
        float(len(words & evidence.words)),
    ]
    return row, ClaimDetail(new_nums, new_names, negation, flipped)


def _sorted(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(items))


_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "non-")


def _opposed(token: str, aligned: TextFacts) -> bool:
    """``token`` is the opposite of a word of ``aligned`` (listed, or un-/in-/dis-/non-)."""
    listed = ANTONYMS.get(token)
    return bool(
        (listed and listed & aligned.tokens)
        or token in aligned.unprefixed
        or not aligned.tokens.isdisjoint(_unprefixed(token))
    )


@lru_cache(maxsize=1 << 16)
def _unprefixed(token: str) -> tuple[str, ...]:
    """``token`` without a negating prefix (``unlikely`` -> ``likely``), if it has one."""
    return tuple(
        token[len(p) :] for p in _PREFIXES if token.startswith(p) and len(token) > len(p) + 3
    )


def _share_found(claim: TextFacts, evidence: TextFacts) -> float:
    """Share of the claim's word pairs in the evidence; a one-word claim: its word."""
    if claim.bigrams:
        return len(claim.bigrams & evidence.bigrams) / len(claim.bigrams)
    single = claim.tokens | claim.numbers
    return float(bool(single) and single <= (evidence.tokens | evidence.numbers))


def _spec(feature: str) -> tuple[int, str]:
    """(claim column, reduction) of a feature: ``x_min``, ``x_mean``, ``x_max``, ``log_x``
    (log1p of the sum over claims), ``word_share`` (the content words found in the evidence
    over all content words, pooled over claims) or a bare flag column (any claim: the max)."""
    if feature == "word_share":
        return _C["content_found"], "share"
    if feature.startswith("log_"):
        return _C[feature.removeprefix("log_")], "logsum"
    for op in ("min", "mean", "max"):
        if feature.endswith(f"_{op}"):
            return _C[feature.removesuffix(f"_{op}")], op
    return _C[feature], "max"


_COLUMN, _OP = zip(*(_spec(f) for f in CANDIDATES), strict=True)
_COLS = np.array(_COLUMN)
_OPS = np.array(_OP)
_LOG = _OPS == "logsum"
_SHARE = _OPS == "share"
_WORDS = _C["content_words"]


def aggregate_many(rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The reply features (:data:`CANDIDATES`) of many replies at once: ``rows`` stacks the
    claim rows of every reply, reply ``i``'s from ``starts[i]`` (each reply has a claim)."""
    r = np.asarray(rows, dtype=np.float64)[:, _COLS]
    starts = np.asarray(starts, dtype=np.intp)
    counts = np.diff(np.append(starts, len(r)))
    sums = np.add.reduceat(r, starts, axis=0)
    out = sums / counts[:, None]
    for op, reduce in (("min", np.minimum), ("max", np.maximum)):
        mask = np.equal(_OPS, op)
        out[:, mask] = reduce.reduceat(r[:, mask], starts, axis=0)
    out[:, _LOG] = np.log1p(sums[:, _LOG])
    total = np.add.reduceat(np.asarray(rows, dtype=np.float64)[:, _WORDS], starts)
    out[:, _SHARE] = _share(sums[:, _SHARE], total[:, None])
    return out


def _share(found: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Found over total, 1.0 where there is nothing to find (a claim of figures only)."""
    return np.where(total > 0, found / np.where(total > 0, total, 1.0), 1.0)


def claim_features(rows: np.ndarray) -> np.ndarray:
    """The reply features of each claim on its own: ``(claims, len(CANDIDATES))``."""
    raw = np.asarray(rows, dtype=np.float64).reshape(-1, len(CLAIM_COLUMNS))
    r = raw[:, _COLS]
    r[:, _LOG] = np.log1p(r[:, _LOG])
    r[:, _SHARE] = _share(r[:, _SHARE], raw[:, [_WORDS]])
    return r
