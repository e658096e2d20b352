"""The recording proxy against a real HTTP upstream, reached over its Unix socket as an agent reaches it.

The upstream here behaves as real APIs and real clients do: it compresses its answers, counts tokens, and is
called with query strings, probes and methods the proxy does not relay.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from orchestrator.agents import Budget, BudgetLimits
from orchestrator.agents.prices import load_prices
from orchestrator.agents.proxy import ModelProxy
from orchestrator.events import EventLog, read_events

MODEL = "scripted-model-1"
ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "stop_reason": "tool_use",
          "content": [{"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "ls"}}],
          "usage": {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0}}


class Upstream(BaseHTTPRequestHandler):
    """Answers /v1/messages gzip-compressed whatever the client accepts, and count_tokens plainly; remembers
    every request line it was sent."""

    seen: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        Upstream.seen.append(f"{self.command} {self.path} key={self.headers.get('x-api-key')}")
        if self.path.startswith("/v1/messages/count_tokens"):
            data, encoded = json.dumps({"input_tokens": 321}).encode(), False
        else:
            data, encoded = gzip.compress(json.dumps(ANSWER).encode()), True
        self.send_response(200)
        self.send_header("content-type", "application/json")
        if encoded:
            self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Upstream.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxied(upstream, tmp_path):
    proxy = ModelProxy(tmp_path / "proxy", upstream, "real-key", MODEL, load_prices()).start()
    client = httpx.Client(transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy",
                          headers={"x-api-key": proxy.token}, timeout=30)
    events = EventLog(tmp_path / "events.jsonl", "t/a/0")
    yield proxy, client, events, tmp_path / "events.jsonl"
    client.close()
    proxy.stop()
    events.close()


def body(model=MODEL):
    return {"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def test_a_compressed_answer_reaches_the_agent_decoded_and_is_charged(proxied):
    proxy, client, events, path = proxied
    proxy.attach(events, Budget(BudgetLimits()))
    r = client.post("/v1/messages?beta=true", json=body())
    assert r.status_code == 200 and r.json()["usage"]["input_tokens"] == 1000  # decodable by the agent
    assert Upstream.seen == ["POST /v1/messages?beta=true key=real-key"]  # the query string kept; the real key
    proxy.wait_idle()  # the agent may have read the whole answer before the proxy recorded it
    [call] = [e for e in read_events(path) if e["kind"] == "model_call"]
    assert (call["input_tokens"], call["output_tokens"]) == (1000, 200)
    assert call["cost_usd"] == pytest.approx((1000 * 3.0 + 200 * 15.0) / 1e6)
    assert [e["tool"] for e in read_events(path) if e["kind"] == "model_tool_use"] == ["Bash"]


def test_counting_tokens_is_relayed_and_recorded_but_not_charged(proxied):
    proxy, client, events, path = proxied
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    r = client.post("/v1/messages/count_tokens", json=body())
    assert r.status_code == 200 and r.json() == {"input_tokens": 321}
    proxy.wait_idle()
    kinds = [e["kind"] for e in read_events(path)]
    assert "model_call" not in kinds
    [counted] = [e for e in read_events(path) if e["kind"] == "model_count_tokens"]
    assert counted["input_tokens"] == 321 and counted["model_requested"] == MODEL
    assert budget.cost_usd == 0.0


def test_probes_are_answered_here_and_every_refusal_is_recorded(proxied):
    proxy, client, events, path = proxied
    assert client.get("/v1/models").status_code == 404  # before the trial started: kept, recorded on attach
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    hello = client.head("/api/hello")
    assert hello.status_code == 200 and hello.content == b""
    assert client.post("/v1/files", json={}).status_code == 404
    assert client.delete("/v1/messages").status_code == 405
    assert client.request("CONNECT", "/v1/messages").status_code == 405  # a forward proxy's method: recorded too
    assert client.post("/v1/messages", json=body(), headers={"x-api-key": "stolen"}).status_code == 401
    assert Upstream.seen == []  # nothing of it went upstream
    evs = read_events(path)
    assert [e["path"] for e in evs if e["kind"] == "proxy_probe"] == ["/api/hello"]
    refused = [(e["method"], e["path"], e["status"], e["reason"]) for e in evs if e["kind"] == "proxy_refused"]
    assert refused == [("GET", "/v1/models", 404, "path_not_relayed"), ("POST", "/v1/files", 404, "path_not_relayed"),
                       ("DELETE", "/v1/messages", 405, "method_not_relayed"),
                       ("CONNECT", "/v1/messages", 405, "method_not_relayed"),
                       ("POST", "/v1/messages", 401, "unknown_token")]
    assert budget.refused_requests == {"path_not_relayed": 2, "method_not_relayed": 2, "unknown_token": 1}


def test_a_request_for_another_model_is_refused_and_recorded(proxied):
    proxy, client, events, path = proxied
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    assert client.post("/v1/messages", json=body("claude-opus-4-1-20250805")).status_code == 403
    assert budget.refused_requests == {"model_not_pinned": 1}
    assert Upstream.seen == []
    [refused] = [e for e in read_events(path) if e["kind"] == "model_refused"]
    assert refused["reason"] == "model_not_pinned"


def test_server_side_tools_are_refused_they_would_reach_out_for_the_agent(proxied):
    proxy, client, events, path = proxied
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    for extra in ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
                  {"mcp_servers": [{"type": "url", "url": "https://attacker.example/mcp", "name": "x"}]}):
        assert client.post("/v1/messages", json={**body(), **extra}).status_code == 403
    client_tools = {"tools": [{"name": "Bash", "input_schema": {"type": "object"}},
                              {"type": "bash_20250124", "name": "bash"}]}  # run by the client, in the sandbox
    assert client.post("/v1/messages", json={**body(), **client_tools}).status_code == 200
    proxy.wait_idle()
    assert budget.refused_requests == {"server_side_tool": 2} and len(Upstream.seen) == 1


def test_a_secret_in_the_query_or_a_header_is_never_sent(proxied):
    proxy, client, events, path = proxied
    proxy.attach(events, Budget(BudgetLimits()), canaries=["tbcanary-0123456789abcdef0123"])
    assert client.post("/v1/messages?x=tbcanary-0123456789abcdef0123", json=body()).status_code == 403
    assert client.post("/v1/messages", json=body(),
                       headers={"anthropic-beta": "x-tbcanary-0123456789abcdef0123"}).status_code == 403
    assert client.post("/v1/messages?bad=%23#frag", json=body()).status_code in (200, 404)  # never a crash
    assert Upstream.seen[:2] != ["POST /v1/messages?x=tbcanary-0123456789abcdef0123 key=real-key"]
    assert not any("tbcanary" in line for line in Upstream.seen)
    assert [e["kind"] for e in read_events(path)].count("egress_canary") == 2


SECRET = "tbcanary-0123456789abcdef0123"


def test_a_secret_written_with_json_escapes_or_invisible_characters_is_never_sent(proxied):
    proxy, client, events, path = proxied
    proxy.attach(events, Budget(BudgetLimits()), canaries=[SECRET])
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)  # what the provider's JSON parser reads as the secret
    raw = ('{"model": "%s", "max_tokens": 10, "messages": [{"role": "user", "content": "%s"}]}' % (MODEL, escaped))
    assert SECRET not in raw
    assert client.post("/v1/messages", content=raw, headers={"content-type": "application/json"}).status_code == 403
    inner = json.dumps({"note": escaped})  # a JSON string inside a string: escaped twice
    for content in ("\u200b".join(SECRET), "\ufeff".join(SECRET), inner):
        msg = {**body(), "messages": [{"role": "user", "content": content}]}
        assert client.post("/v1/messages", json=msg).status_code == 403, content
    assert Upstream.seen == []
    assert [e["kind"] for e in read_events(path)].count("egress_canary") == 4
    honest = {**body(), "messages": [{"role": "user", "content": "caf\u00e9 \\u0041 \u200b ok"}]}
    assert client.post("/v1/messages", json=honest).status_code == 200  # an honest request is relayed


def _image(source):
    return {**body(), "messages": [{"role": "user", "content": [{"type": "image", "source": source},
                                                                {"type": "text", "text": "what is this?"}]}]}


def test_content_the_provider_would_fetch_from_a_url_is_refused(proxied):
    proxy, client, events, path = proxied
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    url = {"type": "url", "url": "https://attacker.example/pixel.png"}
    in_tool_result = {**body(), "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": [
            {"type": "document", "source": {"type": "url", "url": "https://attacker.example/a.pdf"}}]}]}]}
    in_system = {**body(), "system": [{"type": "image", "source": url}]}
    for request in (_image(url), in_tool_result, in_system):
        r = client.post("/v1/messages", json=request)
        assert r.status_code == 403 and "URL source" in r.json()["error"]["message"]
    assert Upstream.seen == [] and budget.refused_requests == {"provider_fetch": 3}
    refused = [e for e in read_events(path) if e["kind"] == "model_refused"]
    assert [e["reason"] for e in refused] == ["provider_fetch"] * 3
    # the bytes themselves, and a URL the *client* was asked to fetch (a tool call's input), are relayed
    inline = _image({"type": "base64", "media_type": "image/png", "data": base64.b64encode(b"\x89PNG").decode()})
    client_fetch = {**body(), "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "WebFetch",
                                           "input": {"url": "https://docs.python.org/3/", "type": "url"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "no network"}]}]}
    for request in (inline, client_fetch):
        assert client.post("/v1/messages", json=request).status_code == 200
    assert len(Upstream.seen) == 2


def test_openai_content_parts_with_a_url_are_refused(upstream, tmp_path):
    proxy = ModelProxy(tmp_path / "proxy", upstream, "real-key", MODEL, load_prices(), api="openai").start()
    client = httpx.Client(transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy",
                          headers={"authorization": f"Bearer {proxy.token}"}, timeout=30)
    events = EventLog(tmp_path / "events.jsonl", "t/a/0")
    try:
        budget = Budget(BudgetLimits())
        proxy.attach(events, budget)
        chat = {"model": MODEL, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://attacker.example/x.png"}}]}]}
        responses = {"model": MODEL, "input": [{"role": "user", "content": [
            {"type": "input_file", "file_url": "https://attacker.example/x.pdf"}]}]}
        assert client.post("/v1/chat/completions", json=chat).status_code == 403
        assert client.post("/v1/responses", json=responses).status_code == 403
        assert Upstream.seen == [] and budget.refused_requests == {"provider_fetch": 2}
    finally:
        client.close()
        proxy.stop()
        events.close()
    from orchestrator.agents import openai_wire
    inline = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "input_image", "image_url": "DATA:image/png;base64,AAAA"}]}]}
    assert openai_wire.provider_fetches(inline) == []  # the bytes themselves: nothing is fetched


def test_a_request_nested_too_deeply_to_check_is_refused_not_a_crash(proxied):
    proxy, client, events, path = proxied
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    deep = '{"model": "%s", "max_tokens": 10, "messages": [{"role": "user", "content": %s"hi"%s}]}' % (
        MODEL, "[" * 100000, "]" * 100000)
    r = client.post("/v1/messages", content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 403 and budget.refused_requests == {"request_unreadable": 1}
    assert Upstream.seen == []
    assert client.post("/v1/messages", json=body()).status_code == 200  # the proxy still serves
