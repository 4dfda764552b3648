"""Bad command-line arguments of ``contextlens run``: each refused at once, exit 2, in one
line naming the option (or the judge spec, or the file) and what was expected; never a
traceback, a pydantic error, or a run that fails only after it was scored."""

import json
from pathlib import Path

import pytest

CASES = [
    {
        "id": "a",
        "input": "What is the warranty?",
        "actual_output": "Two years.",
        "retrieval_context": ["The warranty lasts two years."],
        "expected_output": "Two years.",
    }
]


@pytest.fixture
def cases_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return path


@pytest.fixture
def run(run_cli, tmp_path, cases_file):
    """``run(*options)``: ``contextlens run`` over one case, offline unless told."""

    def go(*options):
        base = ["run", cases_file, "-m", "context-precision", "--out", tmp_path / "o", "-q"]
        return run_cli(*base, "--no-store", *options)

    return go


def refused(code, text, *words):
    assert code == 2, text
    assert "Traceback" not in text and "pydantic" not in text, text
    assert "validation error" not in text, text
    for word in words:
        assert word in text, text


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("http://127.0.0.1:99999/v1#m", ["port 99999 is out of range (1-65535)"]),
        ("http://127.0.0.1:0/v1#m", ["port 0 is out of range (1-65535)"]),
        ("https://user:key@example.test:70000/v1#m", ["port 70000 is out of range"]),
        ("http://127.0.0.1:abc/v1#m", ["port 'abc' is not a number"]),
        ("http://:8080/v1#m", ["no host"]),
        ("ftp://x/v1#m", ["unsupported URL scheme 'ftp'", "http://HOST:PORT/v1#MODEL"]),
    ],
)
def test_a_judge_url_that_cannot_work_is_refused_at_once(run, tmp_path, spec, words):
    code, text = run("--judge", spec)
    refused(code, text, "judge spec", spec.rpartition("@")[2], *words)
    assert "key@" not in text  # a secret in the URL stays masked
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("attr", "words"),
    [
        ("os:getcwd", ["'os:getcwd' is the function", "getcwd", "not a judge", "a judge is"]),
        ("builtins:object", ["builtins.object", "not a judge", "a judge is"]),
        ("json:loads", ["json.loads", "needs arguments (s)"]),
    ],
)
def test_a_module_attribute_that_is_no_judge_is_a_usage_error(run, attr, words):
    code, text = run("--judge", attr)
    refused(code, text, "--judge", *words)
    assert len(text.strip().splitlines()) <= 3  # one line, however the console wraps it


def test_a_failing_judge_factory_is_one_line_not_a_traceback(run, tmp_path, monkeypatch):
    (tmp_path / "badjudge.py").write_text("def make():\n    raise RuntimeError('no key')\n")
    monkeypatch.chdir(tmp_path)
    code, text = run("--judge", "badjudge:make")
    refused(code, text, "badjudge:make", "RuntimeError: no key")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("http://127.0.0.1:1/v1#e", ["not named by a URL", "minilm or module:attr"]),
        ("http://127.0.0.1:99999/v1#e", ["not named by a URL"]),
        ("nonsense", ["unknown embedder", "minilm or module:attr"]),
        ("os:getcwd", ["as an embedding model"]),
    ],
)
def test_a_bad_embedder_is_a_usage_error(run, spec, words):
    code, text = run("-m", "context-similarity", "--embedder", spec)
    refused(code, text, "--embedder", *words)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--concurrency", "0"), "--concurrency expects a whole number >= 1, got 0"),
        (("--repeats", "0"), "--repeats expects a whole number >= 1, got 0"),
        (("--max-cost", "inf"), "--max-cost expects a finite number, got inf"),
        (("--max-cost", "1e400"), "--max-cost expects a finite number, got inf"),
        (("--judge-timeout", "nan"), "--judge-timeout expects a finite number, got nan"),
        (("--judge-timeout", "inf"), "--judge-timeout expects a finite number, got inf"),
        (("--judge-timeout", "-5"), "--judge-timeout expects a number > 0, got -5"),
        (("--max-tokens", "0"), "--max-tokens expects a whole number > 0, got 0"),
        (("--name", ""), "--name: a run name is a non-empty text"),
    ],
)
def test_an_option_out_of_range_is_said_as_the_option(run, options, said):
    code, text = run(*options)
    refused(code, text, said)
    assert "max_concurrency" not in text and "RunConfig" not in text


def test_a_store_whose_folder_cannot_be_made_is_a_warning_and_the_run_goes_on(
    run_cli, tmp_path, cases_file
):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = blocker / "runs" / "store.sqlite"
    code, text = run_cli(
        "run", cases_file, "-m", "context-precision", "--out", tmp_path / "o", "-q",
        "--store", store,
    )  # fmt: skip
    assert code == 0, text
    assert "warning: this run is not recorded in the run store" in text
    assert str(store) in text and "error:" not in text
    assert (tmp_path / "o" / "latest").exists()


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")
def test_a_store_under_proc_is_a_warning(run_cli, tmp_path, cases_file):
    code, text = run_cli(
        "run", cases_file, "-m", "context-precision", "--out", tmp_path / "o", "-q",
        "--store", "/proc/x/y.sqlite",
    )  # fmt: skip
    assert code == 0 and "not recorded in the run store" in text, text


@pytest.mark.parametrize("option", ["--csv", "--junit", "--markdown"])
def test_an_output_file_that_cannot_be_written_is_refused_before_the_run(run, tmp_path, option):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, text = run(option, blocker / "sub" / "out.txt")
    refused(code, text, option, str(blocker / "sub" / "out.txt"), "is a file, not a folder")
    assert not (tmp_path / "o").exists()  # refused before any work


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")
@pytest.mark.parametrize("option", ["--csv", "--junit", "--markdown"])
def test_an_output_file_under_proc_is_refused_before_the_run(run, tmp_path, option):
    code, text = run(option, "/proc/nope.out")
    refused(code, text, option, "/proc/nope.out", "cannot be written")
    assert not (tmp_path / "o").exists()


def test_output_files_are_not_made_before_the_run(run, tmp_path):
    csv = tmp_path / "new" / "items.csv"
    code, text = run("--csv", csv, "--dry-run")
    assert code == 0, text
    assert not csv.exists() and not csv.parent.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".contextlens-probe")]


def test_a_llama_file_that_is_not_gguf_is_refused_up_front(run, tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model at all")
    code, text = run("--judge", f"llama:{fake}")
    refused(code, text, str(fake), "not a GGUF file")
    assert not (tmp_path / "o").exists()


def test_a_gguf_file_passes_the_check(tmp_path):
    from contextlens.judges.spec import JudgeSpec

    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert JudgeSpec.parse(f"llama:{path}").target == str(path)
