"""Every code example of the README and of docs/ runs, in the order of its page.

Each page gets a folder of its own, the working directory of its examples, holding what the
pages take as given: ``examples/`` (the repository's), ``cases.jsonl`` (the shipped
``examples/data/rag_cases.jsonl``) and ``sessions.jsonl`` (the demo's TechStore sessions).

- A ``python`` block is executed; the blocks of a page share one namespace.
- A block with a title (```` ```jsonl title="labels.jsonl" ````) is written to that file.
- A ``bash`` block is run command by command. ``contextlens ...`` goes through the command
  line in this process; ``python FILE`` and ``pytest ...`` run in a subprocess; ``export
  NAME=VALUE`` sets a variable for the page's later commands; ``source .venv/bin/activate`` is
  the environment the tests already run in. A command exits 0 unless its comment says
  ``exits N``. Anything else is an error of the page.
- ``<!-- skip: next "why" -->`` before a block marks it as not run, with the reason, which is
  reported as the test's skip reason.

The judges are real backends talking HTTP to :class:`contextlens.testing.FakeOpenAIServer` on
127.0.0.1, which answers every reply schema with its smallest valid instance: ``openai:MODEL``
through ``OPENAI_BASE_URL`` (with a made-up ``OPENAI_API_KEY``), and a judge URL on this
machine (``http://127.0.0.1:8080/v1#MODEL``, ``http://localhost:11434/v1#MODEL``) at the fake
server's address. A ``llama:FILE.gguf`` judge runs SmolLM2's GGUF in process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import SkipTest

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from contextlens.metrics import registry
from contextlens.testing import FakeOpenAIServer, smollm2_gguf
from support.schema_judge import smallest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LOCAL_JUDGE_URL = re.compile(r"http://(?:127\.0\.0\.1|localhost):\d+/v1")
# Ray Data warns of its own deprecated settings when it first makes a dataset (Scale out).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.*")
EXPORTS = "__exported__"  # the variables a page's shell blocks exported, in its namespace
FENCE = re.compile(r"^ *```([^\n`]*)\n", re.M)


# -- the parsers ------------------------------------------------------------------------------


def write_file(example: Example) -> None:
    """A titled block: its text is the file of that name, in the page's folder."""
    name, text = example.parsed
    path = Path.cwd() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


class FileBlockParser:
    """Blocks whose info line has a title: ```` ```LANG title="NAME" ````."""

    lexer = RawFencedCodeBlockLexer(
        info_pattern=re.compile(r'(?P<language>\w+) +title="(?P<title>[^"]+)"$\n', re.M)
    )

    def __call__(self, document: Document):
        for region in self.lexer(document):
            yield Region(
                region.start,
                region.end,
                (region.lexemes["title"], str(region.lexemes["source"])),
                write_file,
            )


def commands(source: str) -> list[str]:
    """The logical lines of a shell block: continuations joined, blank lines dropped."""
    lines, current = [], ""
    for raw in source.splitlines():
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        if current.strip():
            lines.append(current.strip())
        current = ""
    return lines


def split_comment(line: str) -> tuple[str, str]:
    """A command line and its comment: from a ``#`` that starts a word outside quotes, as
    the shell reads it (``http://host/v1#model`` holds no comment)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1 :]
    return line, ""


def expected_status(comment: str) -> int:
    """The exit status a command's comment announces (``# ... exits 1 ...``), else 0."""
    found = re.search(r"\bexits (\d+)", comment)
    return int(found.group(1)) if found else 0


def run_contextlens(args: list[str]) -> tuple[int, str]:
    """``contextlens ARGS`` in this process: the exit status and what it printed."""
    from contextlens.cli import main

    out = io.StringIO()
    argv = sys.argv
    sys.argv = ["contextlens", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
    return code, out.getvalue()


def run_subprocess(args: list[str]) -> tuple[int, str]:
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=300, env=os.environ.copy(), check=False
    )
    return done.returncode, done.stdout + done.stderr


def run_shell(example: Example) -> None:
    for line in commands(str(example.parsed)):
        command, comment = split_comment(line)
        expected = expected_status(comment)
        command = LOCAL_JUDGE_URL.sub(os.environ["DOCS_FAKE_JUDGE_URL"], command)
        words = shlex.split(os.path.expandvars(command))
        if not words:
            continue
        if words[0] == "export" and len(words) == 2 and "=" in words[1]:
            name, _, value = words[1].partition("=")
            os.environ[name] = example.namespace.setdefault(EXPORTS, {})[name] = value
            continue
        if words == ["source", ".venv/bin/activate"]:
            continue
        if words[0] == "contextlens":
            code, text = run_contextlens(words[1:])
        elif words[0] == "python":
            code, text = run_subprocess([sys.executable, *words[1:]])
        elif words[0] == "pytest":
            code, text = run_subprocess(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[1:]]
            )
        else:
            raise AssertionError(f"the docs test does not run {words[0]!r}: {line}")
        assert code == expected, f"`{line}` exited {code}, not {expected}:\n{text}"
        for shown in re.findall(r'"([^"]+)"', comment.partition("printing")[2]):
            assert shown in " ".join(text.split()), f"`{line}` did not print {shown!r}:\n{text}"


PARSERS = [
    PythonCodeBlockParser(),
    CodeBlockParser("bash", run_shell),
    FileBlockParser(),
    SkipParser(),
]
SYBIL = Sybil(PARSERS, path=str(ROOT))


# -- the pages --------------------------------------------------------------------------------


@dataclass
class Page:
    """One page's examples, evaluated in order, each once, whichever test asks first."""

    path: Path
    examples: list[Example]
    folder: Path | None = None
    outcomes: dict[int, BaseException | None] = field(default_factory=dict)

    @property
    def runnable(self) -> list[int]:
        """The examples that are code (a skip directive is not one)."""
        return [
            i for i, e in enumerate(self.examples) if not isinstance(e.region.evaluator, Skipper)
        ]

    def run_through(self, index: int) -> None:
        for i in range(index + 1):
            if i not in self.outcomes:
                try:
                    self.examples[i].evaluate()
                    self.outcomes[i] = None
                except BaseException as exc:  # recorded; raised by the example's own test
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    self.outcomes[i] = exc
        failed_before = [self.examples[i].line for i in range(index) if failed(self.outcomes[i])]
        outcome = self.outcomes[index]
        if outcome is not None:
            if failed_before and not isinstance(outcome, SkipTest):
                outcome.add_note(f"(after the failed examples at lines {failed_before})")
            raise outcome


def failed(outcome: BaseException | None) -> bool:
    return outcome is not None and not isinstance(outcome, SkipTest)


def _pages() -> dict[str, Page]:
    pages = {}
    for path in PAGES:
        document = SYBIL.parse(path)
        pages[str(path.relative_to(ROOT))] = Page(path, list(document))
    return pages


PAGE_OF = _pages()
CASES = [
    pytest.param(name, i, id=f"{name}:{page.examples[i].line}")
    for name, page in PAGE_OF.items()
    for i in page.runnable
]


def smallest_reply(request: dict[str, Any]) -> str:
    """The smallest reply the request's schema accepts (a plain verdict without one)."""
    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema")
    if schema is None:
        return '{"reason": "ok", "score": 1.0}'
    return json.dumps(smallest(schema, schema.get("$defs", {})))


@pytest.fixture(scope="module")
def fake_judge():
    with FakeOpenAIServer(reply=smallest_reply, slots=8) as server:
        yield server


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Each page's folder; the metrics a page registers are unregistered after the pages."""
    metrics_before = set(registry.names())
    made: dict[str, Path] = {}
    yield (
        lambda name: (
            made[name] if name in made else made.setdefault(name, _folder(tmp_path_factory, name))
        )
    )
    for name in set(registry.names()) - metrics_before:
        registry.unregister(name)
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():  # the cluster the Scale out page started
        ray.shutdown()


def _folder(tmp_path_factory, name: str) -> Path:
    folder = tmp_path_factory.mktemp(re.sub(r"\W", "-", name))
    (folder / "examples").symlink_to(ROOT / "examples")
    (folder / "cases.jsonl").write_bytes((ROOT / "examples/data/rag_cases.jsonl").read_bytes())
    techstore = ROOT / "src/contextlens/demo/techstore.jsonl"
    (folder / "sessions.jsonl").write_bytes(techstore.read_bytes())
    gguf = smollm2_gguf()
    if gguf is not None:
        (folder / Path(gguf).name).symlink_to(gguf)
    return folder


@pytest.mark.parametrize(("name", "index"), CASES)
def test_the_example_runs(name, index, fake_judge, folders, monkeypatch):
    page = PAGE_OF[name]
    if page.folder is None:
        page.folder = folders(name)
    monkeypatch.chdir(page.folder)
    monkeypatch.setenv("CONTEXTLENS_CACHE_DIR", str(page.folder / ".cache"))
    monkeypatch.setenv("CONTEXTLENS_STORE", str(page.folder / ".store" / "runs.sqlite3"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_judge.base_url)
    monkeypatch.setenv("DOCS_FAKE_JUDGE_URL", fake_judge.base_url)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(page.folder / "step-summary.md"))
    monkeypatch.setenv("COLUMNS", "160")
    for variable, value in page.examples[0].namespace.get(EXPORTS, {}).items():
        monkeypatch.setenv(variable, value)
    environment = dict(os.environ)
    try:
        page.run_through(index)
    finally:  # what an example exported stays with its page
        os.environ.clear()
        os.environ.update(environment)


# -- what the pages hold ----------------------------------------------------------------------


def test_every_code_block_is_run_or_says_why_not():
    """A python or shell block that no parser takes would go untested: there is none."""
    for name, page in PAGE_OF.items():
        text = page.path.read_text(encoding="utf-8")
        taken = {example.start for example in page.examples}
        for match in FENCE.finditer(text):
            info = match.group(1).strip()
            if info.split(" ", 1)[0] in {"python", "bash", "sh", "shell", "console"} or (
                "title=" in info
            ):
                line = text.count("\n", 0, match.start()) + 1
                assert match.start() in taken, f"{name}:{line}: a ```{info} block that is not run"


def test_the_pages_have_examples_to_run():
    assert len(CASES) >= 60, len(CASES)
    assert all(PAGE_OF[name].examples for name in ("README.md", "docs/getting-started.md"))


def test_the_readme_sample_line_is_a_line_of_the_shipped_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [sample] = re.findall(r"```json\n(.*?)\n```", readme, re.S)
    shipped = (ROOT / "examples/data/rag_cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert sample in shipped


FIGURE_PAGES = ("docs/figures.md", "docs/judges.md", "docs/offline-scorers.md")


def tables(text: str) -> list[list[str]]:
    """The Markdown tables of a page, each as its rows (the header row first)."""
    found, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(line.strip())
        elif rows:
            found.append(rows)
            rows = []
    return found


def test_a_table_of_figures_copies_its_rows_from_the_figures_pages():
    """A table whose header is that of a table of measured figures holds only rows that
    those pages (where each table stands under the command that made it) hold too."""
    source = "\n".join((ROOT / page).read_text(encoding="utf-8") for page in FIGURE_PAGES)
    headers = {rows[0] for rows in tables(source)}
    copied = 0
    for name, page in PAGE_OF.items():
        if name in FIGURE_PAGES:
            continue
        for rows in tables(page.path.read_text(encoding="utf-8")):
            if rows[0] in headers:
                for row in rows[2:]:
                    assert row in source, f"{name}: a row of figures found nowhere: {row}"
                    copied += 1
    assert copied >= 40, copied


def test_the_readme_figures_are_in_the_figures_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
    figures = (ROOT / "docs/figures.md").read_text(encoding="utf-8")
    [table] = tables(section)
    for row in table[2:]:
        _what, figure, command = (cell.strip() for cell in row.strip("|").split("|"))
        assert command.strip("`") in figures, command
        for number in re.findall(r"\d[\d,]*(?:\.\d+)?", figure):
            assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", figures), (number, row)


def test_the_sample_lines_are_lines_of_the_shipped_files():
    shipped = set()
    for path in ("examples/data/rag_cases.jsonl", "src/contextlens/demo/techstore.jsonl"):
        shipped |= set((ROOT / path).read_text(encoding="utf-8").splitlines())
    samples = 0
    for name, page in PAGE_OF.items():
        text = page.path.read_text(encoding="utf-8")
        for block in re.findall(r'```(?:json|jsonl title="techstore.jsonl")\n(.*?)```', text, re.S):
            for line in block.splitlines():
                assert line in shipped, f"{name}: a sample line that no shipped file holds: {line}"
                samples += 1
    assert samples >= 4, samples


def test_the_field_table_of_the_input_formats_page_is_the_loaders():
    from contextlens.fields import TEST_CASE_FIELDS

    page = (ROOT / "docs/input-formats.md").read_text(encoding="utf-8")
    [table] = [rows for rows in tables(page) if rows[0].startswith("| field | also |")]
    for row in table[2:]:
        field, also = (cell.strip() for cell in row.strip("|").split("|")[:2])
        names = set(re.findall(r"`([^`]+)`", field + also))
        canonical = TEST_CASE_FIELDS.canonical(field.strip("`"))
        known = TEST_CASE_FIELDS.get(canonical)
        assert names == {known.name, *known.aliases}, row
