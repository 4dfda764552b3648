"""Keep every test's cache and run store out of the user's folders."""

import os
import sys

import pytest

# LiteLLM fetches a price list from the internet when imported, unless told not to; the test
# modules import it at collection, before any fixture runs.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


@pytest.fixture(autouse=True)
def _private_folders(tmp_path_factory, monkeypatch):
    """Each test gets its own cache (the seed shells cache judge replies, so one test's
    replies must not answer another's) and its own run store (what one test's runs record
    must not be another's history)."""
    monkeypatch.setenv("CONTEXTLENS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("CONTEXTLENS_STORE", str(tmp_path_factory.mktemp("store") / "runs.sqlite3"))


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """Run the ``contextlens`` command in-process: ``(exit status, stdout + stderr)``."""
    from contextlens.cli import main

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["contextlens", *map(str, args)])
        monkeypatch.setenv("COLUMNS", "200")
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


@pytest.fixture
def rule_model():
    """``rule_model(fn)``: a real LangChain chat model whose reply is ``fn(prompt)``, the
    prompt being the last message's text. Unlike ``FakeListChatModel`` its replies do not
    depend on the order in which concurrent calls arrive."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class RuleChatModel(BaseChatModel):
        rule: object
        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "rule"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            self.calls += 1
            text = self.rule(messages[-1].content)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    return lambda fn: RuleChatModel(rule=fn)
