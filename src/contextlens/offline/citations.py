"""Citation markers and source lists: how a RAG answer points at its sources, not a claim.

``"Refunds take 14 days (source: doc 3)."``, ``"Refunds take 14 days [2]."`` and a closing
``"Sources: doc 1, doc 3"`` block state nothing the context could support or contradict, so
the offline scorers read the answer without them (:func:`strip_citations`).

:func:`find_citations` reads the same markers as citations: each with its place in the text
and the source numbers it names (``[1-3]`` names 1, 2 and 3; a footnote ``[^2]`` names the
source its definition line ``[^2]: doc 4`` names, else 2). :func:`cited_sentences` splits the
answer into its sentences, without markers, each with the citations attached to it: a marker
belongs to the sentence it follows (or, at the start of a line, the one it opens), and a
trailing ``"Source: doc 2"`` to the last sentence of its line. A source list in a block of
its own is not attached to any sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from contextlens.offline.text import sentences

_REF = r"(?:doc(?:ument)?|source|src|ref(?:erence)?|passage|chunk|context|p)\.?\s*\#?\s*\d+"
_NUMS = r"\d+(?:\s*(?:,|;|-|–|and)\s*\d+)*"
#: Inline markers: [2], [1, 3], [1-3], [doc 2], [^1], 【4†source】, (source: doc 3), (doc 3),
#: (Source 2; Source 4), (sources: 1, 2), and a bare (2) before punctuation or the line's end.
_INLINE = re.compile(
    rf"""\s?(?:
        \[\^?\s*(?:{_NUMS}|{_REF}(?:\s*[,;]\s*{_REF})*)\s*\]
      | 【[^】]{{0,40}}】
      | \(\s*(?:(?:sources?|refs?|references?|see|cf\.?|citations?)\s*:?\s*)?
            {_REF}(?:\s*(?:,|;|and)\s*(?:{_REF}|\d+))*\s*\)
      | \(\s*(?:sources?|refs?|references?|citations?)\s*:?\s*{_NUMS}\s*\)
      | \(\s*{_NUMS}\s*\)(?=\s*(?:[.,;:!?]|$))
      | \(\s*(?:sources?|references?|citations?)\s*:[^()\n]{{0,120}}\)
    )""",
    re.IGNORECASE | re.VERBOSE,
)
#: A line that opens a source list: "Sources:", "References: doc 1, doc 2", "**Sources**".
_LIST_HEAD = re.compile(
    r"^\s*[*_#>]*\s*(?:sources?|references?|citations?|bibliography)(?:\s+used)?"
    r"\s*[*_]*\s*(?::.*)?$",
    re.IGNORECASE,
)
#: A trailing "Source: doc 2" or "Sources: 1, 3" after the last sentence of a line.
_TRAILING = re.compile(
    rf"\s*\b(?:sources?|references?)\s*:\s*(?:{_REF}|{_NUMS})(?:\s*(?:,|;|and)\s*(?:{_REF}|\d+))*"
    r"\s*\.?\s*$",
    re.IGNORECASE,
)
#: An item of a source list: "- doc 1", "[2] TechStore policy", "1. https://...".
_LIST_ITEM = re.compile(
    rf"^\s*(?:[-*•]|\d+[.)]|\[\d+\])?\s*(?:{_REF}|https?://\S+|\[\d+\].*|\S.{{0,150}})$",
    re.IGNORECASE,
)
_URL_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*<?https?://\S+>?\s*$", re.IGNORECASE)


@lru_cache(maxsize=4096)
def strip_citations(text: str) -> str:
    """``text`` without citation markers, source-list blocks and lines that are only a link.

    A source list is a line opening with "Sources:" / "References:" (and what follows it on
    that line), with the list items under it up to the next blank line. Nothing else moves.
    """
    if not text:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    in_list = False
    for line in lines:
        if _LIST_HEAD.match(line):
            in_list = True
            continue
        if in_list:
            if not line.strip():
                in_list = False
            elif _LIST_ITEM.match(line):
                continue
            else:
                in_list = False
        if _URL_LINE.match(line):
            continue
        kept.append(_TRAILING.sub("", _INLINE.sub("", line)))
    out = "\n".join(kept)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", out).strip()


#: A footnote definition line: ``[^2]: doc 4`` (or any text after the colon).
_FOOTNOTE_DEF = re.compile(r"^\s*\[\^\s*(\d+)\s*\]\s*:\s*(.*)$")
_FOOTNOTE_REF = re.compile(r"\[\^\s*(\d+)\s*\]")
_NUMBER_RANGE = re.compile(r"(\d+)\s*[-–]\s*(\d+)|(\d+)")
#: The widest range a marker such as ``[1-9]`` is read as naming each source of.
MAX_RANGE = 50


@dataclass(frozen=True)
class Citation:
    """One citation marker: its text, where it is in the answer (``start``/``end``, offsets
    in the whole text) and the source numbers it names, as written (1-based)."""

    marker: str
    start: int
    end: int
    numbers: tuple[int, ...]


@dataclass(frozen=True)
class CitedSentence:
    """A sentence of the answer without its markers, and the citations attached to it."""

    sentence: str
    citations: tuple[Citation, ...]

    @property
    def numbers(self) -> tuple[int, ...]:
        """The source numbers its citations name, each once, in order."""
        return tuple(dict.fromkeys(n for c in self.citations for n in c.numbers))


def _numbers(marker: str) -> tuple[int, ...]:
    found: list[int] = []
    for m in _NUMBER_RANGE.finditer(marker):
        if m.group(3) is not None:
            found.append(int(m.group(3)))
            continue
        low, high = int(m.group(1)), int(m.group(2))
        if low <= high <= low + MAX_RANGE:
            found.extend(range(low, high + 1))
        else:
            found.extend((low, high))
    return tuple(dict.fromkeys(found))


def footnotes(text: str) -> dict[int, tuple[int, ...]]:
    """The source numbers each footnote's definition line names (``[^2]: doc 4`` -> 4; a
    definition that names no number names its footnote's own)."""
    out: dict[int, tuple[int, ...]] = {}
    for line in (text or "").splitlines():
        m = _FOOTNOTE_DEF.match(line)
        if m:
            out[int(m.group(1))] = _numbers(m.group(2)) or (int(m.group(1)),)
    return out


def _line_markers(line: str, offset: int, notes: dict[int, tuple[int, ...]]) -> list[Citation]:
    found: list[Citation] = []
    for m in _INLINE.finditer(line):
        raw = m.group(0)
        lead = len(raw) - len(raw.lstrip())
        marker = raw.strip()
        ref = _FOOTNOTE_REF.fullmatch(marker)
        numbers = notes.get(int(ref.group(1)), (int(ref.group(1)),)) if ref else _numbers(marker)
        if numbers:
            start = offset + m.start() + lead
            found.append(Citation(marker, start, offset + m.end(), numbers))
    trailing = _TRAILING.search(_INLINE.sub(lambda m: " " * len(m.group(0)), line))
    if trailing is not None:
        marker = line[trailing.start() : trailing.end()].strip()
        numbers = _numbers(marker)
        if numbers:
            start = (
                offset
                + trailing.start()
                + (len(trailing.group(0)) - len(trailing.group(0).lstrip()))
            )
            found.append(Citation(marker, start, offset + trailing.end(), numbers))
    return found


def find_citations(text: str) -> list[Citation]:
    """Every citation marker of ``text`` (inline, footnote and trailing "Source: N"), in
    order, with the source numbers it names; markers in a source-list block are left out."""
    return [c for cited in _cited(text) for c in cited.citations]


@lru_cache(maxsize=1024)
def _cited(text: str) -> tuple[CitedSentence, ...]:
    notes = footnotes(text)
    out: list[CitedSentence] = []
    offset = 0
    in_list = False
    for line in (text or "").splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        bare = line.rstrip("\r\n")
        if _FOOTNOTE_DEF.match(bare) or _URL_LINE.match(bare):
            continue
        if _LIST_HEAD.match(bare):
            in_list = True
            continue
        if in_list:
            if not bare.strip():
                in_list = False
                continue
            if _LIST_ITEM.match(bare):
                continue
            in_list = False
        markers = _line_markers(bare, start, notes)
        out.extend(_attach(bare, start, markers))
    return tuple(out)


def _attach(line: str, offset: int, markers: list[Citation]) -> list[CitedSentence]:
    """The sentences of one line, each with the markers that follow it."""
    clean: list[str] = []
    places: list[int] = []  # each marker's place in the clean line
    pos = 0
    for c in sorted(markers, key=lambda c: c.start):
        clean.append(line[pos : c.start - offset])
        places.append(sum(map(len, clean)))
        pos = c.end - offset
    clean.append(line[pos:])
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", "".join(clean))
    found = sentences(text)
    if not found:
        return []
    starts: list[int] = []
    at = 0
    for s in found:
        k = text.find(s, at)
        starts.append(max(k, at))
        at = max(k, at) + len(s)
    attached: list[list[Citation]] = [[] for _ in found]
    for c, place in zip(sorted(markers, key=lambda c: c.start), places, strict=True):
        owner = max((i for i, st in enumerate(starts) if st < place), default=0)
        attached[owner].append(c)
    return [CitedSentence(s, tuple(a)) for s, a in zip(found, attached, strict=True)]


def cited_sentences(text: str) -> list[CitedSentence]:
    """The sentences of ``text`` without citation markers, footnote definitions and source
    lists, each with the citations attached to it, in order."""
    return list(_cited(text))
