"""A strict local stand-in for the OpenAI Batch API and the Anthropic Message Batches API.

It serves both APIs over HTTP on 127.0.0.1 so a batch client can be checked against the
documented wire format rather than against its own assumptions. What it enforces:

OpenAI (``Authorization: Bearer <key>``, else 401 ``{"error": {message, type, code}}``):
  * ``POST /v1/files`` takes multipart/form-data with ``purpose=batch`` and a ``.jsonl`` file.
    Every line must be a JSON object with exactly ``custom_id`` (string, unique in the file),
    ``method`` ("POST"), ``url`` ("/v1/chat/completions") and ``body`` (``model`` string,
    ``messages`` list of ``{role, content}``). Any violation, or an empty file, is a 400 that
    names the line number.
  * ``POST /v1/batches`` needs a known batch file, ``endpoint`` equal to the lines' ``url``,
    ``completion_window`` "24h", and string-to-string ``metadata``; unknown keys are a 400.
  * ``GET /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel`` and
    ``GET /v1/files/{id}[/content]``. Batches move validating -> in_progress -> finalizing ->
    completed over ``--process-seconds``; cancelling -> cancelled keeps finished results.
    Output lines come back shuffled. ``--fail-every N`` gives every Nth request of a batch a
    status-500 line in the error file; ``--expire-every N`` makes every Nth batch "expired",
    its unprocessed requests getting ``batch_expired`` lines in the error file.
  * Completions answer a ``json_schema`` response_format with a deterministic object valid for
    the schema, otherwise ``{"reason": "ok", "score": 0.5}``.

Anthropic (``x-api-key: <key>`` and ``anthropic-version``, else 401 authentication_error):
  * ``POST /v1/messages/batches`` needs ``requests`` of ``{custom_id, params}``, custom_id
    matching ``^[a-zA-Z0-9_-]{1,64}$`` and unique, ``params`` with ``model``, integer
    ``max_tokens`` and ``messages`` whose roles are only "user"/"assistant"; ``system`` must
    be a string or a list of text blocks.
  * ``GET /v1/messages/batches/{id}``, ``POST .../{id}/cancel`` and ``GET .../{id}/results``
    (shuffled JSONL of succeeded / errored / canceled / expired results, only once "ended").

``GET /stats`` (no auth) reports what was accepted. Run as a script
(``--port 0 --key KEY``; prints ``listening on http://127.0.0.1:PORT``) or use
``StrictBatchServer`` as a context manager.
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import email.policy
import hashlib
import json
import math
import random
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]
CHAT_URL = "/v1/chat/completions"
DEFAULT_TEXT = '{"reason": "ok", "score": 0.5}'
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
BATCH_KEYS = {"input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after"}
DAY = 86400
STAMPS = "in_progress_at finalizing_at completed_at failed_at expired_at cancelling_at cancelled_at"
RESULT_KINDS = ("succeeded", "errored", "canceled", "expired")


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code

    def body(self, anthropic: bool) -> JSON:
        kinds = {401: "authentication_error", 404: "not_found_error"}
        if anthropic:
            kind = kinds.get(self.status, "invalid_request_error")
            return {"type": "error", "error": {"type": kind, "message": self.message}}
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": None, "code": self.code}}


def _stable(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:24]


def _rfc3339(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


def _shuffled(lines: list[JSON], seed: str) -> list[JSON]:
    out = list(lines)
    random.Random(seed).shuffle(out)
    if len(out) > 1 and out == lines:
        out = out[1:] + out[:1]
    return out


def _jsonl(lines: list[JSON]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _number(schema: JSON, kind: str) -> float | int:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")

    def fits(v: float) -> bool:
        inside = (lo is None or v >= lo) and (hi is None or v <= hi)
        return inside and (xlo is None or v > xlo) and (xhi is None or v < xhi)

    value: float = 0.5 if kind == "number" else 1
    if not fits(value):
        low = lo if lo is not None else xlo
        high = hi if hi is not None else xhi
        options: list[float] = []
        if low is not None and high is not None:
            options.append((low + high) / 2)
        options += [low, low + 1] if low is not None else []
        options += [high, high - 1] if high is not None else []
        if kind == "integer":
            options = [f(o) for o in options for f in (math.ceil, math.floor)]
        value = next((o for o in options if fits(o)), value)
    return int(value) if kind == "integer" else float(value)


def fill_schema(schema: Any, root: JSON, depth: int = 0) -> Any:
    """A deterministic value valid for a JSON schema: required properties only."""
    if not isinstance(schema, dict) or depth > 40:
        return "ok"
    if isinstance(schema.get("$ref"), str):
        node: Any = root
        for part in schema["$ref"].removeprefix("#").strip("/").split("/"):
            node = node.get(part, {}) if part and isinstance(node, dict) else node
        return fill_schema(node, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, dict)]
        options = [o for o in options if o.get("type") != "null"] or options
        if options:
            return fill_schema(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required") or []
        return {name: fill_schema(props.get(name, {}), root, depth + 1) for name in required}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        count = min(count, int(schema.get("maxItems", count)))
        return [fill_schema(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind in ("number", "integer"):
        return _number(schema, kind)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "ok".ljust(int(schema.get("minLength", 0)), "k")
    return text[: int(schema["maxLength"])] if "maxLength" in schema else text


def _completion_text(body: JSON) -> str:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt["json_schema"]["schema"]
        return json.dumps(fill_schema(schema, schema))
    return DEFAULT_TEXT


def _need(ok: object, message: str, code: str | None = None) -> None:
    if not ok:
        raise ApiError(400, message, code)


def _validate_openai_line(n: int, raw: str, seen: set[str]) -> JSON:
    where = f"line {n}"
    try:
        line = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"{where}: not valid JSON ({exc.msg})", "invalid_jsonl") from None
    _need(isinstance(line, dict), f"{where}: expected a JSON object", "invalid_jsonl")
    keys = sorted(line)
    _need(
        keys == ["body", "custom_id", "method", "url"],
        f"{where}: keys must be exactly body, custom_id, method, url; got {keys}",
    )
    cid, body = line["custom_id"], line["body"]
    _need(isinstance(cid, str) and cid, f"{where}: custom_id must be a non-empty string")
    _need(cid not in seen, f"{where}: duplicate custom_id {cid!r}", "duplicate_custom_id")
    _need(line["method"] == "POST", f"{where}: method must be 'POST', got {line['method']!r}")
    _need(line["url"] == CHAT_URL, f"{where}: url must be {CHAT_URL!r}, got {line['url']!r}")
    _need(isinstance(body, dict), f"{where}: body must be an object")
    _need(
        isinstance(body.get("model"), str) and body["model"],
        f"{where}: body.model must be a non-empty string",
    )
    msgs = body.get("messages")
    _need(isinstance(msgs, list) and msgs, f"{where}: body.messages must be a non-empty list")
    for k, msg in enumerate(msgs):
        _need(
            isinstance(msg, dict)
            and msg.get("role") in OPENAI_ROLES
            and isinstance(msg.get("content"), str | list),
            f"{where}: body.messages[{k}] must be {{role, content}} with a known role",
        )
    fmt = body.get("response_format")
    if fmt is not None:
        kinds = ("text", "json_object", "json_schema")
        _need(
            isinstance(fmt, dict) and fmt.get("type") in kinds,
            f"{where}: body.response_format.type must be one of {kinds}",
        )
        spec = fmt.get("json_schema")
        _need(
            fmt["type"] != "json_schema"
            or (
                isinstance(spec, dict)
                and isinstance(spec.get("name"), str)
                and isinstance(spec.get("schema"), dict)
            ),
            f"{where}: body.response_format.json_schema needs a name and a schema object",
        )
    seen.add(cid)
    return line


def _validate_anthropic(payload: JSON) -> list[JSON]:
    _need(sorted(payload) == ["requests"], f"body must have only 'requests', got {sorted(payload)}")
    reqs = payload["requests"]
    _need(isinstance(reqs, list) and reqs, "requests: must be a non-empty list")
    seen: set[str] = set()
    for i, req in enumerate(reqs):
        at = f"requests.{i}"
        _need(
            isinstance(req, dict) and sorted(req) == ["custom_id", "params"],
            f"{at}: must have exactly the keys 'custom_id' and 'params'",
        )
        cid, params = req["custom_id"], req["params"]
        _need(
            isinstance(cid, str) and CUSTOM_ID.match(cid),
            f"{at}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$, got {cid!r}",
        )
        _need(cid not in seen, f"{at}.custom_id: duplicate custom_id {cid!r}", "duplicate")
        seen.add(cid)
        _need(isinstance(params, dict), f"{at}.params: must be an object")
        _need(
            isinstance(params.get("model"), str) and params["model"],
            f"{at}.params.model: Field required",
        )
        tokens = params.get("max_tokens")
        _need(
            isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1,
            f"{at}.params.max_tokens: Field required (a positive integer)",
        )
        msgs = params.get("messages")
        _need(isinstance(msgs, list) and msgs, f"{at}.params.messages: must be a non-empty list")
        for k, msg in enumerate(msgs):
            role = msg.get("role") if isinstance(msg, dict) else None
            _need(
                role in ("user", "assistant"),
                f"{at}.params.messages.{k}.role: Input should be 'user' or 'assistant', got"
                f" {role!r}; put a system prompt in the top-level 'system' parameter",
            )
            _need(
                isinstance(msg.get("content"), str | list),
                f"{at}.params.messages.{k}.content: Field required",
            )
        system = params.get("system")
        _need(
            system is None
            or isinstance(system, str)
            or (isinstance(system, list) and all(isinstance(b, dict) for b in system)),
            f"{at}.params.system: must be a string or a list of text blocks",
        )
    return reqs


@dataclass
class Job:
    provider: str
    id: str
    requests: list[JSON]
    created: float
    expire: bool
    input_file_id: str | None = None
    metadata: Any = None
    cancel_at: float | None = None
    results: dict[str, Any] | None = None
    counts: dict[str, int] = field(default_factory=dict)


class State:
    def __init__(self, key: str, process_seconds: float, fail_every: int, expire_every: int):
        self.key, self.p = key, max(process_seconds, 0.0)
        self.fail_every, self.expire_every = fail_every, expire_every
        self.lock = threading.Lock()
        self.files: dict[str, JSON] = {}
        self.content: dict[str, bytes] = {}
        self.lines: dict[str, list[JSON]] = {}
        self.jobs: dict[str, Job] = {}
        self.made = {"openai": 0, "anthropic": 0}
        self.root = ""
        self.stats = dict.fromkeys(
            ("files", "batches", "requests", "cancelled", "duplicate_custom_ids_rejected"), 0
        )

    # --- shared timeline -------------------------------------------------------------------
    def _done_at(self, job: Job, i: int) -> float:
        n = len(job.requests)
        if job.expire and i >= n // 2:
            return math.inf
        start, span = (0.1, 0.7) if job.provider == "openai" else (0.0, 0.9)
        return job.created + self.p * (start + span * (i + 1) / n)

    def _outcome(self, job: Job, i: int, horizon: float) -> str:
        if self._done_at(job, i) > horizon:
            return "pending"
        return "failed" if self.fail_every > 0 and (i + 1) % self.fail_every == 0 else "ok"

    def _ended(self, job: Job, now: float) -> bool:
        if job.cancel_at is not None:
            return now >= job.cancel_at + 0.2 * self.p
        return now >= job.created + self.p

    def _new_job(self, provider: str, prefix: str, requests: list[JSON]) -> Job:
        self.made[provider] += 1
        expire = self.expire_every > 0 and self.made[provider] % self.expire_every == 0
        job = Job(
            provider,
            prefix + _stable(provider, self.made[provider], time.time()),
            requests,
            time.time(),
            expire,
        )
        self.jobs[job.id] = job
        self.stats["batches"] += 1
        return job

    def _job(self, job_id: str, provider: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None or job.provider != provider:
            raise ApiError(404, f"No batch found with id '{job_id}'.")
        return job

    # --- OpenAI ----------------------------------------------------------------------------
    def upload(self, fields: dict[str, tuple[str | None, bytes]]) -> JSON:
        purpose = fields.get("purpose", (None, b""))[1].decode(errors="replace")
        if purpose != "batch":
            raise ApiError(400, f"purpose must be 'batch', got {purpose!r}")
        if "file" not in fields or not fields["file"][0]:
            raise ApiError(400, "missing multipart field 'file' with a filename")
        name, data = fields["file"]
        if not str(name).endswith(".jsonl"):
            raise ApiError(400, f"file must be a .jsonl file, got {name!r}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "file is not valid UTF-8") from None
        if not text.strip():
            raise ApiError(400, "file is empty: a batch input file needs at least one request")
        rows = text.removesuffix("\n").split("\n")
        seen: set[str] = set()
        lines: list[JSON] = []
        with self.lock:
            try:
                for n, raw in enumerate(rows, 1):
                    lines.append(_validate_openai_line(n, raw.removesuffix("\r"), seen))
            except ApiError as exc:
                if exc.code == "duplicate_custom_id":
                    self.stats["duplicate_custom_ids_rejected"] += 1
                raise
            obj = self._add_file(str(name), data, "batch")
            self.lines[obj["id"]] = lines
            self.stats["files"] += 1
        return obj

    def _add_file(self, name: str, data: bytes, purpose: str) -> JSON:
        fid = "file-" + _stable(name, time.time(), len(self.files))
        obj = {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
        }
        self.files[fid], self.content[fid] = obj, data
        return obj

    def file(self, fid: str, content: bool) -> JSON | bytes:
        with self.lock:
            if fid not in self.files:
                raise ApiError(404, f"No such File object: {fid}")
            return self.content[fid] if content else self.files[fid]

    def create_batch(self, payload: JSON) -> JSON:
        extra = set(payload) - BATCH_KEYS
        if extra:
            raise ApiError(400, f"Unrecognized request argument supplied: {sorted(extra)[0]}")
        fid, window = payload.get("input_file_id"), payload.get("completion_window")
        meta = payload.get("metadata")
        if window != "24h":
            raise ApiError(400, f"completion_window must be '24h', got {window!r}")
        if meta is not None and not (
            isinstance(meta, dict)
            and len(meta) <= 16
            and all(isinstance(k, str) and len(k) <= 64 for k in meta)
            and all(isinstance(v, str) and len(v) <= 512 for v in meta.values())
        ):
            raise ApiError(400, "metadata must map up to 16 strings (<=64 chars) to strings")
        with self.lock:
            if not isinstance(fid, str) or fid not in self.lines:
                raise ApiError(400, f"input_file_id {fid!r} is not an uploaded batch file")
            lines = self.lines[fid]
            if payload.get("endpoint") != lines[0]["url"]:
                raise ApiError(
                    400,
                    f"endpoint {payload.get('endpoint')!r} does not match the "
                    f"url {lines[0]['url']!r} of the input file's requests",
                )
            job = self._new_job("openai", "batch_", lines)
            job.input_file_id, job.metadata = fid, meta
            self.stats["requests"] += len(lines)
            return self._openai_view(job, time.time())

    def get_batch(self, job_id: str) -> JSON:
        with self.lock:
            return self._openai_view(self._job(job_id, "openai"), time.time())

    def list_batches(self, query: dict[str, list[str]]) -> JSON:
        raw = query.get("limit", ["20"])[0]
        _need(raw.isdigit() and 1 <= int(raw) <= 100, f"limit must be 1..100, got {raw!r}")
        limit = int(raw)
        with self.lock:
            now = time.time()
            jobs = [j for j in reversed(self.jobs.values()) if j.provider == "openai"]
            after = query.get("after", [None])[0]
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else jobs
            data = [self._openai_view(j, now) for j in jobs[:limit]]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        return {
            "object": "list",
            "data": data,
            "first_id": first,
            "last_id": last,
            "has_more": len(jobs) > limit,
        }

    def cancel_batch(self, job_id: str) -> JSON:
        with self.lock:
            now = time.time()
            job = self._job(job_id, "openai")
            status = self._openai_view(job, now)["status"]
            if status in ("completed", "failed", "expired", "cancelled"):
                raise ApiError(400, f"Cannot cancel a batch with status '{status}'.")
            if job.cancel_at is None:
                job.cancel_at = now
                self.stats["cancelled"] += 1
            return self._openai_view(job, now)

    def _openai_view(self, job: Job, now: float) -> JSON:
        c, p = job.created, self.p
        t_run, t_fin, t_end = c + 0.1 * p, c + 0.8 * p, c + p
        cut = job.cancel_at
        horizon = min(now, cut) if cut is not None else now
        ts: dict[str, int | None] = dict.fromkeys(STAMPS.split())
        ts["in_progress_at"] = int(t_run) if horizon >= t_run else None
        if horizon >= t_fin and not job.expire:
            ts["finalizing_at"] = int(t_fin)
        if cut is not None:
            ts["cancelling_at"] = int(cut)
            status = "cancelled" if self._ended(job, now) else "cancelling"
            if status == "cancelled":
                ts["cancelled_at"] = int(cut + 0.2 * p)
        elif now < t_run:
            status = "validating"
        elif now >= t_end:
            status = "expired" if job.expire else "completed"
            ts["expired_at" if job.expire else "completed_at"] = int(t_end)
        else:
            status = "in_progress" if now < t_fin or job.expire else "finalizing"
        terminal = status in ("completed", "expired", "cancelled")
        if terminal and job.results is None:
            self._finish_openai(job, "batch_cancelled" if cut is not None else "batch_expired")
        if terminal:
            counts = job.counts
        else:
            outcomes = [self._outcome(job, i, horizon) for i in range(len(job.requests))]
            failed = outcomes.count("failed")
            counts = {
                "completed": len(outcomes) - outcomes.count("pending") - failed,
                "failed": failed,
            }
        res = job.results or {}
        return {
            "id": job.id,
            "object": "batch",
            "endpoint": CHAT_URL,
            "errors": None,
            "input_file_id": job.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": res.get("output"),
            "error_file_id": res.get("error"),
            "created_at": int(c),
            "expires_at": int(c) + DAY,
            **ts,
            "request_counts": {"total": len(job.requests), **counts},
            "metadata": job.metadata,
        }

    def _finish_openai(self, job: Job, unfinished_code: str) -> None:
        horizon = job.cancel_at if job.cancel_at is not None else job.created + self.p
        out: list[JSON] = []
        err: list[JSON] = []
        for i, line in enumerate(job.requests):
            rid, cid = "batch_req_" + _stable(job.id, i), line["custom_id"]
            outcome = self._outcome(job, i, horizon)
            if outcome == "ok":
                body, text = line["body"], _completion_text(line["body"])
                prompt = max(1, len(json.dumps(body["messages"])) // 4)
                done = max(1, len(text) // 4)
                completion = {
                    "id": "chatcmpl-" + _stable(job.id, i, "c"),
                    "object": "chat.completion",
                    "created": int(self._done_at(job, i)),
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "logprobs": None,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": text, "refusal": None},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": done,
                        "total_tokens": prompt + done,
                    },
                    "system_fingerprint": "fp_strict",
                }
                response = {"status_code": 200, "request_id": _stable(rid), "body": completion}
                out.append({"id": rid, "custom_id": cid, "response": response, "error": None})
            elif outcome == "failed":
                fail = {
                    "error": {
                        "message": "The server had an error processing your request.",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
                response = {"status_code": 500, "request_id": _stable(rid), "body": fail}
                err.append({"id": rid, "custom_id": cid, "response": response, "error": None})
            else:
                why = (
                    "This request could not be executed before the completion window expired."
                    if unfinished_code == "batch_expired"
                    else "The batch was cancelled before this request was executed."
                )
                err.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "response": None,
                        "error": {"code": unfinished_code, "message": why},
                    }
                )
        job.results = {}
        for kind, rows in (("output", out), ("error", err)):
            data = _jsonl(_shuffled(rows, job.id + kind))
            name = f"{job.id}_{kind}.jsonl"
            job.results[kind] = self._add_file(name, data, "batch_output")["id"] if rows else None
        job.counts = {"completed": len(out), "failed": len(err)}

    # --- Anthropic -------------------------------------------------------------------------
    def create_message_batch(self, payload: JSON) -> JSON:
        with self.lock:
            try:
                reqs = _validate_anthropic(payload)
            except ApiError as exc:
                if exc.code == "duplicate":
                    self.stats["duplicate_custom_ids_rejected"] += 1
                raise
            job = self._new_job("anthropic", "msgbatch_", reqs)
            self.stats["requests"] += len(reqs)
            return self._anthropic_view(job, time.time())

    def get_message_batch(self, job_id: str) -> JSON:
        with self.lock:
            return self._anthropic_view(self._job(job_id, "anthropic"), time.time())

    def cancel_message_batch(self, job_id: str) -> JSON:
        with self.lock:
            now = time.time()
            job = self._job(job_id, "anthropic")
            if self._ended(job, now):
                raise ApiError(400, f"Batch '{job_id}' has already ended and cannot be canceled.")
            if job.cancel_at is None:
                job.cancel_at = now
                self.stats["cancelled"] += 1
            return self._anthropic_view(job, now)

    def message_results(self, job_id: str) -> bytes:
        with self.lock:
            job = self._job(job_id, "anthropic")
            view = self._anthropic_view(job, time.time())
            if view["processing_status"] != "ended" or job.results is None:
                raise ApiError(
                    400,
                    f"Batch '{job_id}' is still {view['processing_status']}; "
                    "results are available once processing_status is 'ended'.",
                )
            return job.results["jsonl"]

    def _anthropic_view(self, job: Job, now: float) -> JSON:
        ended = self._ended(job, now)
        if ended and job.results is None:
            self._finish_anthropic(job)
        if ended:
            end = (
                job.cancel_at + 0.2 * self.p if job.cancel_at is not None else job.created + self.p
            )
            status, counts = "ended", {"processing": 0, **job.counts}
        else:
            end, status = None, "canceling" if job.cancel_at is not None else "in_progress"
            counts = {"processing": len(job.requests), **dict.fromkeys(RESULT_KINDS, 0)}
        url = f"{self.root}/v1/messages/batches/{job.id}/results" if ended else None
        return {
            "id": job.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": _rfc3339(end),
            "created_at": _rfc3339(job.created),
            "expires_at": _rfc3339(job.created + DAY),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(job.cancel_at),
            "results_url": url,
        }

    def _finish_anthropic(self, job: Job) -> None:
        horizon = job.cancel_at if job.cancel_at is not None else job.created + self.p
        counts = dict.fromkeys(RESULT_KINDS, 0)
        lines: list[JSON] = []
        for i, req in enumerate(job.requests):
            outcome = self._outcome(job, i, horizon)
            if outcome == "ok":
                params = req["params"]
                message = {
                    "id": "msg_" + _stable(job.id, i),
                    "type": "message",
                    "role": "assistant",
                    "model": params["model"],
                    "content": [{"type": "text", "text": DEFAULT_TEXT}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": max(1, len(json.dumps(params["messages"])) // 4),
                        "output_tokens": max(1, len(DEFAULT_TEXT) // 4),
                    },
                }
                result: JSON = {"type": "succeeded", "message": message}
                counts["succeeded"] += 1
            elif outcome == "failed":
                inner = {"type": "api_error", "message": "Internal server error"}
                result = {"type": "errored", "error": {"type": "error", "error": inner}}
                counts["errored"] += 1
            else:
                kind = "canceled" if job.cancel_at is not None else "expired"
                result = {"type": kind}
                counts[kind] += 1
            lines.append({"custom_id": req["custom_id"], "result": result})
        job.results = {"jsonl": _jsonl(_shuffled(lines, job.id))}
        job.counts = counts


def _parse_multipart(ctype: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    if not ctype.lower().startswith("multipart/form-data") or "boundary=" not in ctype:
        raise ApiError(400, "Content-Type must be multipart/form-data with a boundary")
    head = b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n"
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not msg.is_multipart():
        raise ApiError(400, "could not parse the multipart body")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in msg.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        if name:
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            fields[str(name)] = (part.get_filename(), data)
    return fields


def _json_body(ctype: str, body: bytes, allow_empty: bool = False) -> JSON:
    if allow_empty and not body.strip():
        return {}
    if "application/json" not in ctype.lower():
        raise ApiError(400, f"Content-Type must be application/json, got {ctype!r}")
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise ApiError(400, "request body must be a JSON object")
    return payload


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, method: str) -> None:
        path, body = urlsplit(self.path).path.rstrip("/"), self._read_body()
        anthropic = path.startswith("/v1/messages")
        state = self.server.state
        try:
            if path == "/stats" and method == "GET":
                with state.lock:
                    return self._send(200, json.dumps(state.stats).encode())
            handle = self._anthropic if anthropic else self._openai
            result = handle(state, method, path, body)
            if isinstance(result, bytes):
                kind = "application/binary" if anthropic else "application/octet-stream"
                return self._send(200, result, kind)
            self._send(200, json.dumps(result).encode())
        except ApiError as exc:
            self._send(exc.status, json.dumps(exc.body(anthropic)).encode())
        except Exception as exc:  # a bug here must still answer, not drop the connection
            error = ApiError(500, f"internal error in the strict server: {exc!r}")
            self._send(500, json.dumps(error.body(anthropic)).encode())

    def _openai(self, state: State, method: str, path: str, body: bytes) -> JSON | bytes:
        ctype = self.headers.get("Content-Type", "")
        if self.headers.get("Authorization") != f"Bearer {state.key}":
            raise ApiError(401, "Incorrect API key provided.", "invalid_api_key")
        route = (method, *path.split("/")[2:])
        match route:
            case ("POST", "files"):
                return state.upload(_parse_multipart(ctype, body))
            case ("GET", "files", fid):
                return state.file(fid, content=False)
            case ("GET", "files", fid, "content"):
                return state.file(fid, content=True)
            case ("POST", "batches"):
                return state.create_batch(_json_body(ctype, body))
            case ("GET", "batches"):
                return state.list_batches(parse_qs(urlsplit(self.path).query))
            case ("GET", "batches", bid):
                return state.get_batch(bid)
            case ("POST", "batches", bid, "cancel"):
                _json_body(ctype, body, allow_empty=True)
                return state.cancel_batch(bid)
        raise ApiError(404, f"Invalid URL ({method} {path})", "unknown_url")

    def _anthropic(self, state: State, method: str, path: str, body: bytes) -> JSON | bytes:
        ctype = self.headers.get("Content-Type", "")
        if self.headers.get("x-api-key") != state.key:
            raise ApiError(401, "invalid x-api-key")
        if not self.headers.get("anthropic-version"):
            raise ApiError(401, "anthropic-version header is required")
        route = (method, *path.split("/")[2:])
        match route:
            case ("POST", "messages", "batches"):
                return state.create_message_batch(_json_body(ctype, body))
            case ("GET", "messages", "batches", bid):
                return state.get_message_batch(bid)
            case ("POST", "messages", "batches", bid, "cancel"):
                _json_body(ctype, body, allow_empty=True)
                return state.cancel_message_batch(bid)
            case ("GET", "messages", "batches", bid, "results"):
                return state.message_results(bid)
        raise ApiError(404, f"Not found: {method} {path}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: State


class StrictBatchServer:
    """The strict server on 127.0.0.1 in a background thread; ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        key: str,
        process_seconds: float = 2.0,
        fail_every: int = 0,
        expire_every: int = 0,
        port: int = 0,
    ) -> None:
        self.state = State(key, process_seconds, fail_every, expire_every)
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.state = self.state
        self.port: int = self._httpd.server_address[1]
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.root_url + "/v1"
        self.state.root = self.root_url
        self._thread: threading.Thread | None = None

    def stats(self) -> dict[str, int]:
        with self.state.lock:
            return dict(self.state.stats)

    def start(self) -> StrictBatchServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def __enter__(self) -> StrictBatchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--key", required=True)
    parser.add_argument("--process-seconds", type=float, default=2.0)
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--expire-every", type=int, default=0)
    args = parser.parse_args(argv)
    server = StrictBatchServer(
        args.key, args.process_seconds, args.fail_every, args.expire_every, args.port
    )
    print(f"listening on {server.root_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
