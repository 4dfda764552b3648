"""Test helpers and test data shared by a metric's core tests and its seed-library shell tests."""

import re


def blocks(text: str, tag: str) -> list[str]:
    """The texts of the ``tag`` data blocks of a prompt (``<tag_MARK>`` ... ``</tag_MARK>``),
    in order."""
    return [m.group(2) for m in block_matches(text, tag)]


def block_matches(text: str, tag: str) -> list[re.Match[str]]:
    """The ``tag`` data blocks of a prompt as matches: group 1 the mark, group 2 the text."""
    return list(re.finditer(rf"<{tag}_([0-9a-f]+)>\n(.*?)\n</{tag}_\1>", text, re.S))


def block_of(text: str, tag: str) -> str:
    """The text of the one ``tag`` block of a prompt."""
    [found] = blocks(text, tag)
    return found
