"""Property-based fuzzing of the secret mask: whatever the strings of a result or a case hold
(headers, URLs, quotes, backslashes, brackets), the masked line is valid JSON with the
structure of the unmasked one, each string masked as :func:`redact` masks it; serialized
JSON masked as text stays valid; and no text makes the mask slow."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextlens.cases import CaseRecord
from contextlens.redact import redact
from contextlens.results import ItemResult
from contextlens.runner.folder import masked_json
from contextlens.schemas import ModelTestCase

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: What the patterns react to, and the characters that end or extend a value.
PIECES = [
    "authorization", "Proxy-Authorization", "api-key", "X-API-KEY", "api_key", "bearer ",
    "Bearer sk-0123456789", "Basic ", "token ", "://", "http://", "user:pw@", "@", "?", "&",
    ";", "=", ":", "?token=", "&api_key=", " ", "\t", "\n", ".", "-", "a", "Z", "9", '"', "'",
    "\\", '\\"', "/", ",", "{", "}", "[", "]", "<", "&amp;", "$API_KEY", "\u0130", "\u2028",
]  # fmt: skip
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=12).map("".join)
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False), texts
)
values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=16,
)  # fmt: skip


def masked_alike(plain: Any, masked: Any) -> None:
    """``masked`` is ``plain`` with each string as :func:`redact` masks it: same types, same
    lengths, same numbers, the keys in the same order."""
    assert type(masked) is type(plain)
    if isinstance(plain, str):
        assert masked == redact(plain)
    elif isinstance(plain, list):
        assert len(masked) == len(plain)
        for a, b in zip(plain, masked, strict=True):
            masked_alike(a, b)
    elif isinstance(plain, dict):
        assert len(masked) == len(plain)
        for (ka, va), (kb, vb) in zip(plain.items(), masked.items(), strict=True):
            assert kb == redact(ka) or kb.startswith(redact(ka) + "#")  # two masked alike
            masked_alike(va, vb)
    else:
        assert masked == plain


@FUZZ
@given(case_id=texts, reason=texts, chunks=st.lists(texts, max_size=3), meta=values)
def test_a_masked_line_is_valid_json_shaped_as_the_line_it_masks(case_id, reason, chunks, meta):
    assume(case_id)
    item = ItemResult(case_id=case_id, metric="m", score=-0.5, reason=reason, repeats=[1e-7])
    case = ModelTestCase(
        input="q " + reason, actual_output=case_id, retrieval_context=chunks or None,
        meta={"value": meta, reason or "k": chunks},
    )  # fmt: skip
    record = CaseRecord(case_id=case_id, case=case)
    for model, line, dump in (
        (item, item.model_dump_json(), {}),
        (record, record.line().rstrip("\n"), {"exclude_defaults": True, "fallback": str}),
    ):
        masked = masked_json(model, **dump)
        assert "\n" not in masked
        plain = json.loads(line)
        found = json.loads(masked)  # valid JSON, whatever the strings held
        masked_alike(plain, found)
        if found == plain:  # nothing to mask: the very text model_dump_json writes
            assert masked == line
    read = ItemResult.model_validate_json(masked_json(item))
    assert read.score == -0.5 and read.reason == redact(reason)


@FUZZ
@given(value=values)
def test_serialized_json_masked_as_text_stays_valid(value):
    """Some writers still mask text that holds JSON (a log line quoting a body, the run
    store's rows): a masked value stays inside the string it is in."""
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        json.loads(redact(text))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(motif=st.lists(st.sampled_from(PIECES), min_size=1, max_size=10).map("".join))
def test_no_text_makes_the_mask_slow(motif):
    """Any motif repeated to 256 KB (the shapes that make a regex backtrack repeat) is
    masked in well under a second."""
    text = motif * (262_144 // len(motif))
    start = time.perf_counter()
    redact(text)
    assert time.perf_counter() - start < 0.5
