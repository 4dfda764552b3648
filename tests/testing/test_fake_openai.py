"""The fake OpenAI server, driven with a plain synchronous httpx client."""

from __future__ import annotations

import contextlib
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from contextlens.testing import DEFAULT_REPLY, FakeOpenAIServer, estimate_tokens

MESSAGES = [{"role": "user", "content": "hello there"}]


def chat(client: httpx.Client, base_url: str, **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": MESSAGES, **extra}
    return client.post(f"{base_url}/chat/completions", json=body)


def test_chat_reply_shape_usage_and_counters() -> None:
    with FakeOpenAIServer() as server, httpx.Client() as client:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        response = chat(client, server.base_url)
        assert response.status_code == 200
        data = response.json()
        assert data["object"] == "chat.completion"
        assert data["model"] == "m"
        choice = data["choices"][0]
        assert choice["message"] == {"role": "assistant", "content": DEFAULT_REPLY}
        assert choice["finish_reason"] == "stop"
        usage = data["usage"]
        assert usage["prompt_tokens"] == estimate_tokens("hello there") == 3
        assert usage["completion_tokens"] == estimate_tokens(DEFAULT_REPLY)
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert server.calls == 1
        assert server.prompt_tokens == 3
        assert server.completion_tokens == usage["completion_tokens"]
        assert server.status_counts == {200: 1}
        assert server.requests[-1]["messages"] == MESSAGES


def test_paths_without_v1_and_models() -> None:
    with FakeOpenAIServer(model="fake-x") as server, httpx.Client() as client:
        root = server.base_url.removesuffix("/v1")
        assert chat(client, root).status_code == 200
        response = client.post(f"{root}/embeddings", json={"input": "x"})
        assert response.status_code == 200
        models = client.get(f"{server.base_url}/models").json()
        assert models["data"][0]["id"] == "fake-x"
        assert client.get(f"{root}/models").status_code == 200
        assert client.post(f"{root}/nope", json={}).status_code == 404
        bad = client.post(f"{server.base_url}/chat/completions", content=b"{not json")
        assert bad.status_code == 400
        assert server.calls == 1
        assert server.embedding_calls == 1


def test_scripted_replies_then_reply_function() -> None:
    seen: list[dict[str, Any]] = []

    def reply(request: dict[str, Any]) -> str:
        seen.append(request)
        return json.dumps({"echo": request["messages"][-1]["content"]})

    with FakeOpenAIServer(replies=["first", "second"], reply=reply) as server, httpx.Client() as c:
        contents = [
            chat(c, server.base_url).json()["choices"][0]["message"]["content"] for _ in range(3)
        ]
    assert contents == ["first", "second", '{"echo": "hello there"}']
    assert len(seen) == 1


def test_script_faults_in_order() -> None:
    script = ["429", "ok", "500", "garbage", "truncated"]
    with FakeOpenAIServer(script=script, retry_after="0.05") as server, httpx.Client() as client:
        responses = [chat(client, server.base_url) for _ in range(6)]
    assert [r.status_code for r in responses] == [429, 200, 500, 200, 200, 200]
    assert responses[0].headers["Retry-After"] == "0.05"
    assert responses[0].json()["error"]["type"] == "rate_limit_error"
    garbage = responses[3].json()["choices"][0]["message"]["content"]
    with pytest.raises(ValueError):
        json.loads(garbage)
    truncated = responses[4].json()["choices"][0]
    assert truncated["finish_reason"] == "length"
    assert DEFAULT_REPLY.startswith(truncated["message"]["content"])
    assert len(truncated["message"]["content"]) < len(DEFAULT_REPLY)
    with pytest.raises(ValueError):
        json.loads(truncated["message"]["content"])
    assert responses[5].json()["choices"][0]["message"]["content"] == DEFAULT_REPLY
    assert server.status_counts == {429: 1, 200: 4, 500: 1}
    assert server.script == []


def test_fault_rates_are_deterministic_by_seed() -> None:
    def statuses(seed: int) -> list[int]:
        server = FakeOpenAIServer(fail_429_rate=0.3, fail_500_rate=0.3, seed=seed)
        with server, httpx.Client() as client:
            return [chat(client, server.base_url).status_code for _ in range(30)]

    first, again, other = statuses(1), statuses(1), statuses(2)
    assert first == again
    assert first != other
    assert {200, 429, 500} == set(first)


def test_rate_one_always_fails_and_bad_config_is_rejected() -> None:
    with FakeOpenAIServer(fail_500_rate=1.0) as server, httpx.Client() as client:
        assert {chat(client, server.base_url).status_code for _ in range(5)} == {500}
    with pytest.raises(ValueError):
        FakeOpenAIServer(fail_429_rate=0.7, fail_500_rate=0.7)
    with pytest.raises(ValueError):
        FakeOpenAIServer(script=["boom"])


def test_timeout_fault_hangs_then_answers() -> None:
    with FakeOpenAIServer(timeout_rate=1.0, hang_time=0.3) as server, httpx.Client() as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post(
                f"{server.base_url}/chat/completions",
                json={"messages": MESSAGES},
                timeout=0.05,
            )
        started = time.perf_counter()
        assert chat(client, server.base_url).status_code == 200
        assert time.perf_counter() - started >= 0.3


def test_stop_wakes_hanging_handlers() -> None:
    server = FakeOpenAIServer(timeout_rate=1.0, hang_time=30).start()
    base_url = server.base_url
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(lambda: httpx.post(f"{base_url}/chat/completions", json={}))
        time.sleep(0.1)
        started = time.perf_counter()
        server.stop()
        with contextlib.suppress(httpx.HTTPError):  # the connection may be cut instead
            future.result(timeout=5)
        assert time.perf_counter() - started < 5


def test_latency_and_peak_in_flight() -> None:
    with FakeOpenAIServer(latency=0.05) as server:
        base_url = server.base_url
        client = httpx.Client(limits=httpx.Limits(max_connections=20))
        with client, ThreadPoolExecutor(20) as pool:
            started = time.perf_counter()
            codes = list(pool.map(lambda _: chat(client, base_url).status_code, range(20)))
            elapsed = time.perf_counter() - started
        assert codes == [200] * 20
        assert elapsed < 20 * 0.05  # served concurrently
        assert server.peak_in_flight > 1
        assert server.in_flight == 0


def test_a_server_serving_two_at_once_queues_the_others_in_order() -> None:
    with FakeOpenAIServer(latency=0.3, serves=2) as server:
        base_url = server.base_url
        client = httpx.Client(limits=httpx.Limits(max_connections=6))

        def timed(_: int) -> float:
            started = time.perf_counter()
            assert chat(client, base_url).status_code == 200
            return time.perf_counter() - started

        with client, ThreadPoolExecutor(6) as pool:
            took = sorted(pool.map(timed, range(6)))
    # two at a time: 0.3 s, 0.6 s and 0.9 s, two calls each
    assert [round(t / 0.3) for t in took] == [1, 1, 2, 2, 3, 3]
    assert server.peak_in_flight == 6 and server.in_flight == 0


@pytest.mark.parametrize(
    ("via", "path", "body"),
    [
        ("props", "/props", {"total_slots": 3, "model_path": "/models/fake-model.gguf"}),
        ("info", "/info", {"model_id": "fake-model", "max_concurrent_requests": 3,
                           "router": "text-generation-router"}),
    ],
)  # fmt: skip
def test_the_slot_count_is_reported_as_the_server_of_slots_via_does(via, path, body) -> None:
    with FakeOpenAIServer(slots=3, slots_via=via) as server, httpx.Client() as client:
        root = server.base_url.removesuffix("/v1")
        assert client.get(f"{root}{path}").json() == body
        others = [p for p in ("/props", "/slots", "/info") if p != path]
        assert [client.get(f"{root}{p}").status_code for p in others] == [404, 404]
        assert server.probes == [path]
    with FakeOpenAIServer(slots=2, slots_via="slots") as server, httpx.Client() as client:
        slots = client.get(server.base_url.removesuffix("/v1") + "/slots").json()
        assert [slot["id"] for slot in slots] == [0, 1]


def test_a_probe_fault_fails_every_slot_endpoint() -> None:
    with FakeOpenAIServer(slots=3, probe_fault="500") as server, httpx.Client() as client:
        root = server.base_url.removesuffix("/v1")
        assert [client.get(f"{root}{p}").status_code for p in ("/props", "/info")] == [500, 500]
    with FakeOpenAIServer(probe_fault="garbage") as server, httpx.Client() as client:
        response = client.get(server.base_url.removesuffix("/v1") + "/slots")
        assert response.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            response.json()
    with (
        FakeOpenAIServer(probe_fault="hang", hang_time=5) as server,
        httpx.Client() as client,
        pytest.raises(httpx.ReadTimeout),
    ):
        client.get(server.base_url.removesuffix("/v1") + "/props", timeout=0.3)
    for bad in ({"slots_via": "metrics"}, {"probe_fault": "slow"}, {"serves": 0}):
        with pytest.raises(ValueError):
            FakeOpenAIServer(**bad)


def test_max_in_flight_rejects_the_excess_with_429() -> None:
    with FakeOpenAIServer(latency=0.1, max_in_flight=3, retry_after=2) as server:
        base_url = server.base_url
        client = httpx.Client(limits=httpx.Limits(max_connections=12))
        with client, ThreadPoolExecutor(12) as pool:
            responses = list(pool.map(lambda _: chat(client, base_url), range(12)))
    codes = [r.status_code for r in responses]
    assert codes.count(200) >= 3
    assert codes.count(429) >= 1
    assert all(r.headers["Retry-After"] == "2" for r in responses if r.status_code == 429)
    assert server.peak_in_flight > 3
    assert server.status_counts[429] == codes.count(429)
    assert server.calls == 12


def test_response_format_is_recorded_and_reset_clears() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "S", "schema": {"type": "object"}}}
    with FakeOpenAIServer() as server, httpx.Client() as client:
        chat(client, server.base_url)
        chat(client, server.base_url, response_format=fmt)
        chat(client, server.base_url, response_format={"type": "json_object"})
        assert server.response_formats == [fmt]
        assert server.requests[1]["response_format"] == fmt
        server.reset()
        assert server.calls == 0
        assert server.requests == []
        assert server.response_formats == []
        assert server.status_counts == {}
        assert server.prompt_tokens == server.completion_tokens == 0


def test_embeddings_are_deterministic_unit_vectors() -> None:
    with FakeOpenAIServer() as server, httpx.Client() as client:
        url = f"{server.base_url}/embeddings"
        data = client.post(url, json={"model": "e", "input": ["alpha", "beta", "alpha"]}).json()
        single = client.post(url, json={"model": "e", "input": "alpha"}).json()
        assert server.embedding_calls == 2
        assert server.calls == 0
    vectors = [item["embedding"] for item in data["data"]]
    assert [item["index"] for item in data["data"]] == [0, 1, 2]
    assert all(len(v) == 384 for v in vectors)
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0) for v in vectors)
    assert vectors[0] == vectors[2] == single["data"][0]["embedding"]
    assert vectors[0] != vectors[1]
    assert data["usage"]["prompt_tokens"] == data["usage"]["total_tokens"] == 5  # 2 + 1 + 2


def test_failing_reply_function_gives_500() -> None:
    def reply(request: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    with FakeOpenAIServer(reply=reply) as server, httpx.Client() as client:
        response = chat(client, server.base_url)
        assert response.status_code == 500
        assert "boom" in response.json()["error"]["message"]
        assert server.in_flight == 0
