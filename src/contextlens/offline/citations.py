"""Citation markers and source lists: how a RAG answer points at its sources, not a claim.

``"Refunds take 14 days (source: doc 3)."``, ``"Refunds take 14 days [2]."`` and a closing
``"Sources: doc 1, doc 3"`` block state nothing the context could support or contradict, so
the offline scorers read the answer without them (:func:`strip_citations`).
"""

from __future__ import annotations

import re
from functools import lru_cache

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
