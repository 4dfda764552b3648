"""contextlens against DeepEval, Ragas, Opik and gaussia: the same cases, the same fake judge.

Every library evaluates the same generated RAG cases (a question, an actual output, an
expected output and five retrieved chunks of ~60 words) against the SAME kind of fake
OpenAI-compatible server (:class:`contextlens.testing.fake_openai.FakeOpenAIServer`, 200 ms
per call), one fresh server per library in this process, and the library itself in a
subprocess (a small driver per library in ``benchmarks/peers/``):

* contextlens: ``ContextualRelevancyMetric`` and context precision through
  ``contextlens.evaluate`` (judge spec ``"{base_url}#gpt-4o-mini"``, cache off,
  max_concurrency 64), with this venv's python;
* DeepEval: ``ContextualRelevancyMetric`` through ``deepeval.evaluate`` with
  ``AsyncConfig(max_concurrent=64)`` and ``GPTModel(base_url=...)``;
* Ragas: context precision (``LLMContextPrecisionWithReference``) through ``ragas.evaluate``
  with ``RunConfig(max_workers=64)`` and LangChain's ``ChatOpenAI(base_url=...)``;
* Opik: ``ContextPrecision`` (``track=False``) with ``LiteLLMChatModel("openai/...",
  api_base=...)``, ``ascore`` under ``asyncio.gather`` (64 at a time);
* context awareness, on the same cases as sessions (``peers/sessions.py``: 4 consecutive
  cases to a session, the first case's chunks its system context, each case an
  interaction): contextlens' ``context`` metric through ``contextlens.evaluate`` (as above),
  and gaussia's ``Context.run`` with a ``Retriever`` and LangChain's ``ChatOpenAI(base_url=...)``
  (one interaction at a time: gaussia has no concurrency setting).

``--diagnostics``: judge calls per case of ``rag-diagnostics`` beside Ragas'
``NoiseSensitivity`` (both modes, run on 50 cases), and of the turn metrics beside DeepEval's
(``bench_turn_calls``).

The peers are not dependencies of contextlens; they live in ``benchmarks/.peers-venv``::

    python3 -m venv benchmarks/.peers-venv
    benchmarks/.peers-venv/bin/pip install -r benchmarks/peers-requirements.txt
    .venv/bin/python benchmarks/bench_peers.py            # ~3.5 minutes on 2 cores

Each server answers with a valid reply for its library's prompts (DeepEval: one verdict per
statement of the chunk, then a reason; Ragas: a verdict per chunk; Opik: a score and a
reason; contextlens relevancy: in one reply, a verdict per numbered statement of all the
chunks, a reason of a few words for each chunk's "no"s and one overall reason; contextlens
precision and context: a score and a reason; gaussia: a sentence of reasoning, then a score and an
insight in a json block). A sentence is relevant when it names the case's product code, so
verdicts differ from chunk to chunk, and DeepEval and contextlens, given the same verdicts,
must report the same mean score (a check that both replies were understood); so must
contextlens' context metric and gaussia, whose judge scores an interaction 1.0 when the reply
names a product its session's context names (the session's first) and 0.2 otherwise.

Measured per library: judge calls, prompt and completion tokens (all estimated by the server
as ceil(chars / 4) per message and per response-format schema, which providers count as
prompt; never library-side counts), per case (for the session metrics too: per
interaction), the cost per case at gpt-4o-mini's prices ($0.15 per
million prompt tokens, $0.60 per million completion tokens), wall time and client CPU time
(user+sys of the driver process over the evaluation call alone; the CPU of the whole
subprocess, imports included, is reported too), and the mean number of calls in flight
(server busy time / wall).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peers.sessions import make_sessions

from contextlens.testing.fake_openai import FakeOpenAIServer

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"
PEERS_PYTHON = HERE / ".peers-venv" / "bin" / "python"
LATENCY_S = 0.2
MODEL = "gpt-4o-mini"
CASES_PER_SESSION = 4

# Targets for contextlens (vs DeepEval on the same workload).
TARGET_CALLS_PER_CASE = 1.0
TARGET_PROMPT_TOKEN_RATIO = 1 / 3
TARGET_COMPLETION_TOKEN_RATIO = 1 / 5
TARGET_COST_RATIO = 0.25
PRICE_PER_MILLION = (0.15, 0.60)  # gpt-4o-mini: prompt, completion (USD)
TARGET_WALL_SPEEDUP = 10.0
TARGET_CPU_MS_PER_CALL = 2.0

# An earlier measurement on such a workload at 200 ms latency (for orientation only).
REFERENCE = (
    "DeepEval 4.3.1: 6 calls and 2,531 prompt tokens per case, 30 s for 200 cases, ~30 s "
    "CPU, mean 8 calls in flight; Ragas 0.4.3 context precision: 5 sequential calls and "
    "5,714 prompt tokens per case, 206 s."
)

# -- the workload ----------------------------------------------------------------------

_WORDS = (
    "model context answer question retrieval document passage user assistant metric score "
    "judge claim evidence source policy customer order refund shipping delivery invoice "
    "account password reset error server request response latency cache database index "
    "query vector search ranking result summary report quarter revenue growth market "
    "product feature release version update security patch network storage memory "
    "processor battery screen camera weather river mountain city village harbour school "
    "teacher student library museum history science energy climate forest ocean island "
    "travel train flight hotel dinner recipe garden season morning evening warranty "
    "firmware sensor cable adapter charger printer scanner router modem antenna signal"
).split()
_FILLER = "the a of to in for with on by from after before during without between".split()
_VERBS = (
    "explains describes shows requires supports replaces extends limits improves reduces "
    "covers includes affects stores sends receives checks resets"
).split()
_KINDS = "router kettle printer scanner camera charger sensor modem thermostat speaker".split()
CODE = re.compile(r"\b[A-Z]{2}-\d{3}\b")


def _sentence(rng: random.Random, words: int, code: str | None) -> str:
    parts: list[str] = []
    while len(parts) < words:
        parts += [rng.choice(_FILLER), rng.choice(_WORDS), rng.choice(_VERBS), rng.choice(_WORDS)]
    parts = parts[:words]
    if code is not None:
        parts.insert(rng.randrange(1, len(parts)), f"the {code}")
    text = " ".join(parts)
    return text[0].upper() + text[1:] + "."


def _chunk(rng: random.Random, code: str | None, words: int = 60) -> str:
    """~``words`` words in sentences of 10-15 words; with ``code``, every other sentence
    names the product (a relevant chunk), without it none does (a distractor)."""
    sentences: list[str] = []
    count = 0
    while count < words:
        n = min(rng.randint(10, 15), max(words - count, 6))
        named = code if code is not None and len(sentences) % 2 == 0 else None
        sentences.append(_sentence(rng, n, named))
        count += n + (2 if named else 0)
    return " ".join(sentences)


def make_cases(n: int, seed: int = 20240601) -> list[dict[str, Any]]:
    """``n`` deterministic cases; chunks 0-1 are about the case's product, 2-4 are not."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i in range(n):
        code = f"{chr(65 + i // 26 % 26)}{chr(65 + i % 26)}-{100 + i % 900}"
        kind = rng.choice(_KINDS)
        topic = " ".join(rng.choice(_WORDS) for _ in range(3))
        question = f"How does the {code} {kind} handle {topic} when the {rng.choice(_WORDS)} fails?"
        chunks = [_chunk(rng, code if j < 2 else None) for j in range(5)]
        case = {
            "input": question,
            "actual_output": _sentence(rng, 28, code),
            "expected_output": _sentence(rng, 22, code),
            "retrieval_context": chunks,
        }
        for text in [question, *chunks]:
            if text in seen:
                raise RuntimeError("the generator repeated a text; change the seed")
            seen.add(text)
        cases.append(case)
    return cases


# -- the fake judge's replies, one function per library --------------------------------

REASON = (
    "The first retrieved passages describe the product the question asks about and support "
    "the answer; the later passages discuss unrelated topics and add nothing to it."
)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return ""


def _messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(m.get("role")), _text(m.get("content")))
        for m in body.get("messages") or []
        if isinstance(m, dict)
    ]


def _last_user(body: dict[str, Any]) -> str:
    users = [text for role, text in _messages(body) if role == "user"]
    return users[-1] if users else ""


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _between(text: str, start: str, end: str) -> str:
    i = text.rfind(start)
    if i < 0:
        return ""
    i += len(start)
    j = text.find(end, i)
    return text[i:] if j < 0 else text[i:j]


def _blocks(text: str, name: str) -> list[str]:
    """The texts of the data blocks named ``name`` (``<name_MARK>`` to ``</name_MARK>``)."""
    found = re.findall(rf"<{name}_(\w+)>\n(.*?)\n</{name}_\1>", text, flags=re.DOTALL)
    return [body for _mark, body in found]


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
    return node


def example_from_schema(
    node: dict[str, Any],
    defs: dict[str, Any],
    *,
    key: str = "",
    items: int = 1,
) -> Any:
    """An example object for a JSON schema: strings ``REASON`` for reasons and "ok" else,
    numbers 1 clipped to the bounds, enums their first value, arrays ``items`` items."""
    node = _resolve(node, defs)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    for union in ("anyOf", "oneOf", "allOf"):
        if union in node:
            options = [_resolve(o, defs) for o in node[union]]
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return example_from_schema(chosen, defs, key=key, items=items)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in node:
        return {
            name: example_from_schema(sub, defs, key=name, items=items)
            for name, sub in (node.get("properties") or {}).items()
        }
    if kind == "array":
        count = max(items, int(node.get("minItems", 0)))
        if "maxItems" in node:
            count = min(count, int(node["maxItems"]))
        sub = node.get("items") or {"type": "string"}
        return [example_from_schema(sub, defs, key=key, items=items) for _ in range(count)]
    if kind in ("number", "integer"):
        value = 1.0
        if "maximum" in node:
            value = min(value, node["maximum"])
        if "minimum" in node:
            value = max(value, node["minimum"])
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return REASON if "reason" in key.lower() else "ok"


def _response_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    return None


_SCHEMA_LINE = re.compile(r"follows this JSON schema[^\n]*:\n(\{.*\})\s*$", re.MULTILINE)


def _prompt_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a contextlens prompt states ("... follows this JSON schema ...")."""
    for _, text in reversed(_messages(body)):
        match = _SCHEMA_LINE.search(text)
        if match:
            try:
                schema = json.loads(match.group(1))
            except ValueError:
                continue
            return schema if isinstance(schema, dict) else None
    return None


def deepeval_reply(body: dict[str, Any]) -> str:
    """ContextualRelevancyMetric: verdicts per statement of one chunk, then the reason."""
    prompt = _last_user(body)
    if "'verdicts'" in prompt:
        context = _between(prompt, "\nContext:\n", "\n\nJSON:")
        verdicts = []
        for sentence in _sentences(context):
            if CODE.search(sentence):
                verdicts.append({"statement": sentence, "verdict": "yes", "reason": None})
            else:  # quote the start of the irrelevant statement, as the prompt asks
                quote = " ".join(sentence.split()[:6])
                verdicts.append(
                    {
                        "statement": sentence,
                        "verdict": "no",
                        "reason": f"The context contained '{quote}...', which has nothing to "
                        "do with the input.",
                    }
                )
        return json.dumps({"verdicts": verdicts})
    if "'reason'" in prompt:
        score = _between(prompt, "Contextual Relevancy Score:\n", "\n").strip()
        return json.dumps({"reason": f"The score is {score} because {REASON}"})
    return generic_reply(body)


def _last_object_with(text: str, key: str) -> dict[str, Any]:
    """The last JSON object in ``text`` that has ``key`` (Ragas renders its input as JSON)."""
    decoder = json.JSONDecoder()
    pos = text.rfind("{")
    while pos >= 0:
        try:
            obj, _ = decoder.raw_decode(text, pos)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and key in obj:
            return obj
        pos = text.rfind("{", 0, pos)
    return {}


def ragas_reply(body: dict[str, Any]) -> str:
    """Context precision: is this one chunk useful for the reference answer?"""
    context = str(_last_object_with(_last_user(body), "context").get("context", ""))
    return json.dumps({"reason": REASON, "verdict": 1 if CODE.search(context) else 0})


def ragas_noise_reply(body: dict[str, Any]) -> str:
    """NoiseSensitivity's two prompts: the statements of an answer (its sentences), and a
    verdict per statement on a context (1 when both name the case's product)."""
    prompt = _last_user(body)
    nli = _last_object_with(prompt, "statements")
    if "context" in nli:
        context = str(nli.get("context", ""))
        return json.dumps(
            {
                "statements": [
                    {
                        "statement": str(statement),
                        "reason": REASON,
                        "verdict": int(bool(CODE.search(str(statement)) and CODE.search(context))),
                    }
                    for statement in nli.get("statements") or []
                ]
            }
        )
    answer = str(_last_object_with(prompt, "answer").get("answer", ""))
    return json.dumps({"statements": _sentences(answer) or [answer]})


def opik_reply(body: dict[str, Any]) -> str:
    """ContextPrecision: one score and a reason per case."""
    return json.dumps({"context_precision_score": 0.8, "reason": REASON})


OFF_TOPIC = "about something else, not the product"
_STATEMENT = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


#: The context-awareness verdicts: a reply that names a product its context names follows
#: the context (a session's first interaction), any other is off it.
CONTEXT_VERDICTS = {
    True: (
        1.0,
        "The reply stays with the product the system context describes and claims nothing "
        "that the context does not support.",
    ),
    False: (
        0.2,
        "The reply is about a product the system context never mentions, so it does not "
        "follow the context it was given.",
    ),
}


def _context_verdict(context: str, reply: str) -> tuple[float, str]:
    return CONTEXT_VERDICTS[bool(set(CODE.findall(context)) & set(CODE.findall(reply)))]


def gaussia_reply(body: dict[str, Any]) -> str:
    """Context: a sentence of reasoning, then the JSON its prompt states (score, insight)
    in a json block; under a response format, the JSON alone."""
    system = "\n".join(text for role, text in _messages(body) if role == "system")
    context = _between(system, "\nContext:\n", "\n\nGround Truth Assistant:")
    score, insight = _context_verdict(context, _between(system, "\nAssistant:\n", "\n\n"))
    obj = {"score": score, "insight": insight}
    if _response_schema(body) is not None:
        return json.dumps(obj)
    return (
        "I compared the assistant answer with the products, topics and limits the context "
        f"sets out.\n\n```json\n{json.dumps(obj, indent=2)}\n```"
    )


def contextlens_context_reply(body: dict[str, Any]) -> str:
    """The context metric: a reason of a sentence and a score on the prompt's grid."""
    users = "\n".join(text for role, text in _messages(body) if role == "user")
    context = next(iter(_blocks(users, "context")), "")
    reply = next(iter(_blocks(users, "assistant_reply")), "")
    score, reason = _context_verdict(context, reply)
    text = json.dumps({"reason": reason, "score": score})
    return text if _response_schema(body) is not None else f"```json\n{text}\n```"


def contextlens_reply(body: dict[str, Any]) -> str:
    """ContextualRelevancyMetric: a verdict per numbered statement of all the chunks, a
    reason of a few words for each "no", and the overall reason. Any other contextlens
    prompt gets an example object of the schema it sends (or states)."""
    schema = _response_schema(body) or _prompt_schema(body)
    if schema is None:
        return generic_reply(body)
    users = "\n".join(text for role, text in _messages(body) if role == "user")
    properties = schema.get("properties") or {}
    if "verdicts" in properties and _STATEMENT.search(users):
        verdicts: list[str] = []
        irrelevant: list[dict[str, Any]] = []
        for chunk in _blocks(users, "chunk"):
            off = []  # a chunk's "no"s, off-topic for the same reason: one entry
            for number, text in _STATEMENT.findall(chunk):
                verdicts.append("yes" if CODE.search(text) else "no")
                if verdicts[-1] == "no":
                    off.append(int(number))
            if off:
                irrelevant.append(
                    {"statements": off, "reason": "about something else, not the product"}
                )
        obj: dict[str, Any] = {"verdicts": verdicts, "irrelevant": irrelevant}
        if "reason" in properties:
            obj["reason"] = REASON
    else:
        obj = example_from_schema(schema, schema.get("$defs", {}))
    text = json.dumps(obj)
    return text if _response_schema(body) else f"```json\n{text}\n```"


def generic_reply(body: dict[str, Any]) -> str:
    schema = _response_schema(body) or _prompt_schema(body)
    if schema is None:
        return json.dumps({"reason": REASON, "score": 1.0})
    return json.dumps(example_from_schema(schema, schema.get("$defs", {})))


# -- the server: FakeOpenAIServer plus busy time ---------------------------------------


class TimedFakeServer(FakeOpenAIServer):
    """FakeOpenAIServer that also sums the time chat calls spend in flight (busy time)."""

    def __init__(self, **kwargs: Any) -> None:
        self.busy_s = 0.0
        self.first_start: float | None = None
        self.last_end: float | None = None
        self._busy_lock = threading.Lock()
        super().__init__(**kwargs)

    def _handle(
        self, route: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        t0 = time.perf_counter()
        try:
            return super()._handle(route, body, headers)
        finally:
            t1 = time.perf_counter()
            if route == "chat":
                with self._busy_lock:
                    self.busy_s += t1 - t0
                    self.first_start = t0 if self.first_start is None else self.first_start
                    self.last_end = t1


# -- running one library ---------------------------------------------------------------

PEERS: dict[str, tuple[Path, Callable[[dict[str, Any]], str], str, list[str]]] = {
    # name: (python, the fake judge's replies, driver, driver arguments)
    "contextlens": (Path(sys.executable), contextlens_reply, "contextlens", []),
    "contextlens-precision": (
        Path(sys.executable),
        contextlens_reply,
        "contextlens",
        ["--metric", "context-precision"],
    ),
    "deepeval": (PEERS_PYTHON, deepeval_reply, "deepeval", []),
    "ragas": (PEERS_PYTHON, ragas_reply, "ragas", []),
    "opik": (PEERS_PYTHON, opik_reply, "opik", []),
    "contextlens-context": (
        Path(sys.executable),
        contextlens_context_reply,
        "contextlens_context",
        [],
    ),
    "gaussia": (PEERS_PYTHON, gaussia_reply, "gaussia", []),
    "contextlens-diagnostics": (
        Path(sys.executable),
        contextlens_reply,
        "contextlens",
        ["--metric", "rag-diagnostics"],
    ),
    "ragas-noise": (
        PEERS_PYTHON,
        ragas_noise_reply,
        "ragas",
        ["--metric", "noise-sensitivity"],
    ),
}
#: The peers of ``--diagnostics`` (not of the default run).
DIAGNOSTIC_PEERS = ("contextlens-diagnostics", "ragas-noise")
#: The peers that evaluate sessions (``make_sessions`` of the cases), not cases.
SESSION_PEERS = {"contextlens-context", "gaussia"}
#: Each contextlens metric and its nearest peers: the same measure in another library.
NEAREST = {
    "contextlens": ("contextual relevancy", ["deepeval"]),
    "contextlens-precision": ("context precision", ["opik", "ragas"]),
    "contextlens-context": ("context awareness", ["gaussia"]),
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_library(
    name: str, cases_file: Path, n: int, concurrency: int, workdir: Path, timeout: float
) -> dict[str, Any]:
    python, reply, driver, driver_args = PEERS[name]
    if not python.exists():
        raise SystemExit(
            f"{python} is missing: python3 -m venv benchmarks/.peers-venv && "
            "benchmarks/.peers-venv/bin/pip install -r benchmarks/peers-requirements.txt"
        )
    out = workdir / f"{name}.json"
    rundir = workdir / f"cwd-{name}"  # DeepEval and Ragas write folders into the cwd
    rundir.mkdir(exist_ok=True)
    server = TimedFakeServer(latency=LATENCY_S, reply=reply, model=MODEL)
    with server:
        env = {
            **os.environ,
            # the drivers, and this tree's contextlens (not whichever one is installed)
            "PYTHONPATH": os.pathsep.join([str(PEERS_DIR), str(HERE.parent / "src")]),
            "OPENAI_API_KEY": "sk-fake",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_BASE": server.base_url,
            "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
            "DEEPEVAL_NO_INSPECT_PROMPT": "1",
            "RAGAS_DO_NOT_TRACK": "true",
            "OPIK_TRACK_DISABLE": "true",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        command = [
            str(python),
            str(PEERS_DIR / f"drive_{driver}.py"),
            "--base-url",
            server.base_url,
            "--cases",
            str(cases_file),
            "--n",
            str(n),
            "--concurrency",
            str(concurrency),
            "--model",
            MODEL,
            "--out",
            str(out),
            *driver_args,
        ]
        cpu0, w0 = _children_cpu(), time.perf_counter()
        proc = subprocess.run(
            command, env=env, cwd=rundir, capture_output=True, text=True, timeout=timeout
        )
        process_wall, process_cpu = time.perf_counter() - w0, _children_cpu() - cpu0
        if proc.returncode != 0 or not out.exists():
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            raise SystemExit(f"{name}: the driver failed (exit {proc.returncode})")
        result = json.loads(out.read_text(encoding="utf-8"))
        result.update(
            library=name,
            calls=server.calls,
            prompt_tokens=server.prompt_tokens,
            completion_tokens=server.completion_tokens,
            embedding_calls=server.embedding_calls,
            status_counts={str(k): v for k, v in sorted(server.status_counts.items())},
            peak_in_flight=server.peak_in_flight,
            busy_s=server.busy_s,
            server_span_s=(server.last_end or 0.0) - (server.first_start or 0.0),
            process_wall_s=process_wall,
            process_cpu_s=process_cpu,
            sample_request=server.requests[0] if server.requests else None,
        )
    return result


# -- the report ------------------------------------------------------------------------


def cost(prompt_tokens: float, completion_tokens: float) -> float:
    """USD at gpt-4o-mini's prices."""
    return (prompt_tokens * PRICE_PER_MILLION[0] + completion_tokens * PRICE_PER_MILLION[1]) / 1e6


def _cases(r: dict[str, Any]) -> int:
    """The cases a result covers (a session driver's interactions)."""
    return int(r.get("cases", r["n"]))


def _derived(r: dict[str, Any]) -> dict[str, float]:
    n = max(_cases(r), 1)
    calls = max(r["calls"], 1)
    return {
        "calls_per_case": r["calls"] / n,
        "prompt_per_case": r["prompt_tokens"] / n,
        "completion_per_case": r["completion_tokens"] / n,
        "cost_per_case": cost(r["prompt_tokens"], r["completion_tokens"]) / n,
        "cpu_ms_per_call": 1000 * r["cpu_s"] / calls,
        "mean_in_flight": r["busy_s"] / r["wall_s"] if r["wall_s"] > 0 else math.nan,
    }


def table(results: list[dict[str, Any]], full_n: int) -> str:
    head = (
        "| library | cases | calls/case | prompt tok/case | completion tok/case | USD/case "
        "| wall s | client CPU s | CPU ms/call | mean in flight | peak in flight | failed "
        "| mean score | process CPU s (with imports) |"
    )
    lines = [head, "|" + "---|" * 14]
    for r in results:
        d = _derived(r)
        cases = f"{_cases(r)}" + (" (subset)" if _cases(r) < full_n else "")
        if "cases" in r:
            cases += f" in {r['n']} sessions"
        score = "-" if r["mean_score"] is None else f"{r['mean_score']:.3f}"
        lines.append(
            f"| {r['library']} {r['version']} | {cases} | {d['calls_per_case']:.2f} "
            f"| {d['prompt_per_case']:,.0f} | {d['completion_per_case']:,.0f} "
            f"| {d['cost_per_case']:.5f} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} "
            f"| {d['cpu_ms_per_call']:.2f} "
            f"| {d['mean_in_flight']:.1f} | {r['peak_in_flight']} | {r['n_failed']} "
            f"| {score} | {r['process_cpu_s']:.1f} |"
        )
    return "\n".join(lines)


def ratios(results: list[dict[str, Any]]) -> str:
    by = {r["library"]: r for r in results}
    if "contextlens" not in by or "deepeval" not in by:
        return "(ratios need both contextlens and deepeval)"
    cl, de = by["contextlens"], by["deepeval"]
    dc, dd = _derived(cl), _derived(de)
    wall_cl, wall_de = cl["wall_s"] / max(cl["n"], 1), de["wall_s"] / max(de["n"], 1)
    prompt_ratio = dc["prompt_per_case"] / dd["prompt_per_case"]
    completion_ratio = dc["completion_per_case"] / dd["completion_per_case"]
    cost_ratio = dc["cost_per_case"] / dd["cost_per_case"]
    speedup = wall_de / wall_cl
    checks = [
        (
            "judge calls per case",
            f"{dc['calls_per_case']:.2f} vs {dd['calls_per_case']:.2f} "
            f"(x{dc['calls_per_case'] / dd['calls_per_case']:.2f})",
            f"1 per case: {'met' if dc['calls_per_case'] <= TARGET_CALLS_PER_CASE else 'NOT met'}",
        ),
        (
            "prompt tokens per case",
            f"{dc['prompt_per_case']:,.0f} vs {dd['prompt_per_case']:,.0f} (x{prompt_ratio:.2f})",
            f"<= 1/3: {'met' if prompt_ratio <= TARGET_PROMPT_TOKEN_RATIO else 'NOT met'}",
        ),
        (
            "completion tokens per case",
            f"{dc['completion_per_case']:,.0f} vs {dd['completion_per_case']:,.0f} "
            f"(x{completion_ratio:.2f})",
            f"<= 1/5: {'met' if completion_ratio <= TARGET_COMPLETION_TOKEN_RATIO else 'NOT met'}",
        ),
        (
            "cost per case (gpt-4o-mini prices)",
            f"${dc['cost_per_case']:.5f} vs ${dd['cost_per_case']:.5f} (x{cost_ratio:.2f})",
            f"<= 0.25x: {'met' if cost_ratio <= TARGET_COST_RATIO else 'NOT met'}",
        ),
        (
            "wall time per case",
            f"{1000 * wall_cl:.1f} ms vs {1000 * wall_de:.1f} ms ({speedup:.1f}x faster)",
            f">= 10x faster: {'met' if speedup >= TARGET_WALL_SPEEDUP else 'NOT met'}",
        ),
        (
            "client CPU per judge call",
            f"{dc['cpu_ms_per_call']:.2f} ms vs {dd['cpu_ms_per_call']:.2f} ms "
            f"(x{dc['cpu_ms_per_call'] / dd['cpu_ms_per_call']:.2f})",
            f"< 2 ms: {'met' if dc['cpu_ms_per_call'] < TARGET_CPU_MS_PER_CALL else 'NOT met'}",
        ),
    ]
    lines = ["| contextlens vs DeepEval | contextlens vs DeepEval | target |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in checks]
    return "\n".join(lines)


def nearest(results: list[dict[str, Any]]) -> str:
    """Each contextlens metric's cost per case beside its nearest peers' on the same cases."""
    by = {r["library"]: r for r in results}
    lines = [
        "| measure | library | calls/case | prompt tok/case | completion tok/case | USD/case "
        "| x contextlens |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (measure, peers) in NEAREST.items():
        if name not in by:
            continue
        own = _derived(by[name])["cost_per_case"]
        for library in [name, *peers]:
            if library not in by:
                continue
            r, d = by[library], _derived(by[library])
            lines.append(
                f"| {measure} | {r['library'].split('-')[0]} {r['version']} "
                f"| {d['calls_per_case']:.2f} | {d['prompt_per_case']:,.0f} "
                f"| {d['completion_per_case']:,.0f} | {d['cost_per_case']:.5f} "
                f"| {d['cost_per_case'] / own:.2f} |"
            )
    return "\n".join(lines)


# -- the RAG metrics beside their nearest peer (bench_peers.py --rag) -------------------
#
# faithfulness, context-recall and context-precision-ranked against DeepEval's
# FaithfulnessMetric, ContextualRecallMetric and ContextualPrecisionMetric on the same
# workload and the same kind of server, through the same run_library; the metric goes to
# the drivers (peers/drive_contextlens.py, peers/drive_deepeval.py) as --metric.

RAG_PEERS = {
    "faithfulness": "FaithfulnessMetric",
    "context-recall": "ContextualRecallMetric",
    "context-precision-ranked": "ContextualPrecisionMetric",
}


def _listed(prompt: str, after: str) -> list[str]:
    """The JSON (or Python) list DeepEval renders after ``after``."""
    import ast

    text = _between(prompt, after, "\n\nJSON:").strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            found = parse(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(found, list):
            return [str(x) for x in found]
    return _sentences(text)


def deepeval_rag_reply(body: dict[str, Any]) -> str:
    """FaithfulnessMetric (claims, truths, a verdict per claim, a reason),
    ContextualRecallMetric (a verdict per sentence of the expected output, a reason) and
    ContextualPrecisionMetric (a verdict per chunk, a reason): valid replies in the schema
    each call states."""
    schema = _response_schema(body) or {}
    fields = set(schema.get("properties") or {})
    prompt = _last_user(body)
    if "claims" in fields:
        return json.dumps({"claims": _sentences(_between(prompt, "AI Output:\n", "\n\nJSON:"))})
    if "truths" in fields:
        return json.dumps({"truths": _sentences(_between(prompt, "Text:\n", "\n\nJSON:"))})
    if "verdicts" in fields:
        if "Claims:\n" in prompt:
            count = len(_listed(prompt, "Claims:\n"))
        elif "Expected Output:\n" in prompt:
            count = len(_sentences(_between(prompt, "Expected Output:\n", "\n\nRetrieval")))
        else:
            count = 5  # the workload's chunks
        verdicts = [
            {"verdict": "yes" if k < 2 else "no", "reason": REASON} for k in range(max(count, 1))
        ]
        return json.dumps({"verdicts": verdicts})
    return json.dumps({"reason": f"The score is high because {REASON}"})


def rag_table(results: list[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        "| metric | library | calls/case | prompt tok/case | completion tok/case | USD/case "
        "| x contextlens | wall s | failed | mean score |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    own: dict[str, float] = {}
    for metric, r in results:
        d = _derived(r)
        own.setdefault(metric, d["cost_per_case"])  # contextlens runs first
        score = "-" if r["mean_score"] is None else f"{r['mean_score']:.3f}"
        lines.append(
            f"| {metric} | {r['library'].split('-')[0]} {r['version']} "
            f"| {d['calls_per_case']:.2f} | {d['prompt_per_case']:,.0f} "
            f"| {d['completion_per_case']:,.0f} | {d['cost_per_case']:.5f} "
            f"| {d['cost_per_case'] / own[metric]:.2f} | {r['wall_s']:.2f} | {r['n_failed']} "
            f"| {score} |"
        )
    return "\n".join(lines)


def rag_metrics(args: argparse.Namespace) -> None:
    """Each RAG metric and its DeepEval peer on the workload; prints one table."""
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cpus)")
    results: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-rag-") as tmp:
        workdir = Path(tmp)
        cases_file = workdir / "cases.json"
        cases_file.write_text(json.dumps(make_cases(args.cases)), encoding="utf-8")
        for metric, peer in RAG_PEERS.items():
            PEERS[f"contextlens-{metric}"] = (
                Path(sys.executable),
                contextlens_reply,
                "contextlens",
                ["--metric", metric],
            )
            PEERS[f"deepeval-{metric}"] = (
                PEERS_PYTHON,
                deepeval_rag_reply,
                "deepeval",
                ["--metric", metric],
            )
            for name in (f"contextlens-{metric}", f"deepeval-{metric}"):
                print(f"running {metric} ({peer if 'deepeval' in name else name}) ...", flush=True)
                r = run_library(
                    name, cases_file, args.cases, args.concurrency, workdir, args.timeout
                )
                if r.get("errors"):
                    print(f"  first errors: {r['errors']}")
                results.append((metric, r))
    print()
    print(rag_table(results))


def diagnostics(args: argparse.Namespace) -> None:
    """Judge calls per case: rag-diagnostics beside Ragas' NoiseSensitivity in both modes
    (both run on the workload, calls counted by the server), and the turn metrics beside
    DeepEval's (``bench_turn_calls``: ours counted, DeepEval's computed)."""
    from bench_turn_calls import conversation, counted, deepeval_calls

    n = args.ragas_cases or min(args.cases, 50)
    print(
        f"{n} cases x 5 chunks; calls counted by the fake server ({LATENCY_S * 1000:.0f} ms a call)"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-diagnostics-") as tmp:
        workdir = Path(tmp)
        cases_file = workdir / "cases.json"
        cases_file.write_text(json.dumps(make_cases(n)), encoding="utf-8")
        for name in DIAGNOSTIC_PEERS:
            print(f"running {name} on {n} cases ...", flush=True)
            r = run_library(name, cases_file, n, args.concurrency, workdir, args.timeout)
            if r.get("errors"):
                print(f"  first errors: {r['errors']}")
            d = _derived(r)
            shares = (
                "correctness, completeness, F1, faithfulness, hallucination, noise sensitivity "
                "(relevant, irrelevant), self-knowledge, context recall and utilisation"
                if name == "contextlens-diagnostics"
                else "noise sensitivity (relevant, irrelevant): one metric each"
            )
            rows.append(
                [
                    f"{r['library'].split('-')[0]} {r['version']}",
                    shares,
                    f"{d['calls_per_case']:.2f}",
                    f"{d['cost_per_case']:.5f}",
                    str(r["n_failed"]),
                ]
            )
    print()
    print("| library | shares | calls/case | USD/case | failed |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print("Judge calls per conversation (4 chunks a turn; DeepEval computed from its algorithm)")
    print("| metric | turns | contextlens (counted) | per turn | DeepEval (computed) | per turn |")
    print("|---|---|---|---|---|---|")
    for turns in (1, 5, 10, 20):
        session = conversation(turns, 4)
        for metric in ("turn-faithfulness", "turn-contextual-relevancy"):
            ours, theirs = counted(metric, session), deepeval_calls(metric, turns, 4, 10)
            print(
                f"| {metric} | {turns} | {ours} | {ours / turns:.2f} | {theirs} "
                f"| {theirs / turns:.2f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument(
        "--ragas-cases",
        type=int,
        default=0,
        help="run Ragas on the first N cases only (0: all); it judges a case's chunks in turn",
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--libraries",
        default=",".join(n for n in PEERS if n not in DIAGNOSTIC_PEERS),
        help="comma-separated",
    )
    parser.add_argument("--timeout", type=float, default=400.0, help="per library, seconds")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument(
        "--rag", action="store_true", help="the RAG metrics beside their DeepEval peers instead"
    )
    parser.add_argument(
        "--diagnostics",
        action="store_true",
        help="judge calls per case of rag-diagnostics beside Ragas' noise sensitivity, and of "
        "the turn metrics beside DeepEval's, instead",
    )
    args = parser.parse_args()
    if args.rag:
        rag_metrics(args)
        return
    if args.diagnostics:
        diagnostics(args)
        return

    names = [n.strip() for n in args.libraries.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise SystemExit(f"unknown libraries {unknown}; choose from {sorted(PEERS)}")
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cpus)")
    print(
        f"{args.cases} cases x 5 chunks of ~60 words, latency {LATENCY_S * 1000:.0f} ms per "
        f"call, concurrency {args.concurrency}"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        workdir = Path(tmp)
        cases = make_cases(args.cases)
        sessions = make_sessions(cases, CASES_PER_SESSION)
        cases_file = workdir / "cases.json"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        sessions_file = workdir / "sessions.json"
        sessions_file.write_text(json.dumps(sessions), encoding="utf-8")
        for name in names:
            workload, n = cases_file, args.cases
            if name == "ragas" and args.ragas_cases:
                n = min(args.ragas_cases, args.cases)
            if name in SESSION_PEERS:
                workload, n = sessions_file, len(sessions)
                print(
                    f"running {name} on {n} sessions ({args.cases} cases, "
                    f"{CASES_PER_SESSION} per session) ...",
                    flush=True,
                )
            else:
                print(f"running {name} on {n} cases ...", flush=True)
            r = run_library(name, workload, n, args.concurrency, workdir, args.timeout)
            bad = {k: v for k, v in r["status_counts"].items() if k != "200"}
            d = _derived(r)
            print(
                f"  {r['wall_s']:.2f} s, {r['calls']} calls, {d['calls_per_case']:.2f} calls/case, "
                f"{r['n_failed']} failed" + (f", non-200 replies {bad}" if bad else ""),
                flush=True,
            )
            if r.get("errors"):
                print(f"  first errors: {r['errors']}")
            results.append(r)
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print(table(results, args.cases))
    print()
    print(ratios(results))
    print()
    print(nearest(results))
    print()
    for r in results:
        print(f"- {r['library']}: {r['method']}")
    print(f"\nReference (earlier measurement): {REFERENCE}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
