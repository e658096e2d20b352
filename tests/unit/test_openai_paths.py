"""OpenAI's Chat Completions and Responses APIs: the scripted server and the recording proxy, each driven by the
openai SDK over real HTTP (the proxy over its Unix socket, as an agent reaches it)."""

from __future__ import annotations

import httpx
import openai
import pytest

from orchestrator.agents import Budget, BudgetLimits
from orchestrator.agents.prices import load_prices
from orchestrator.agents.proxy import ModelProxy
from orchestrator.agents.scripted_server import ScriptedModelServer
from orchestrator.events import EventLog, read_events

MODEL = "scripted-model-1"
KEY = "k-openai"
ANSWER = {"content": [{"type": "text", "text": "Looking."},
                      {"type": "tool_use", "name": "shell", "input": {"command": ["bash", "-lc", "ls"]}}],
          "usage": {"input_tokens": 900, "output_tokens": 40, "cache_read_input_tokens": 100}}
MESSAGES = [{"role": "user", "content": "fix it"}]
TOOLS = [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture
def server():
    with ScriptedModelServer() as srv:
        srv.add_script(KEY, [ANSWER] * 8)
        yield srv


def direct(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)


def test_chat_completions_plain_and_streamed(server):
    client = direct(server)
    done = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS)
    call = done.choices[0].message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == ("shell", '{"command": ["bash", "-lc", "ls"]}')
    assert done.choices[0].finish_reason == "tool_calls" and done.choices[0].message.content == "Looking."
    assert (done.usage.prompt_tokens, done.usage.prompt_tokens_details.cached_tokens) == (1000, 100)
    chunks = list(client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS, stream=True,
                                                 stream_options={"include_usage": True}))
    args = "".join(tc.function.arguments or "" for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or [])
    assert args == '{"command": ["bash", "-lc", "ls"]}' and chunks[-1].usage.completion_tokens == 40


def test_responses_plain_and_streamed(server):
    client = direct(server)
    done = client.responses.create(model=MODEL, input="fix it")
    calls = [o for o in done.output if o.type == "function_call"]
    assert [c.name for c in calls] == ["shell"] and done.output_text == "Looking."
    assert (done.usage.input_tokens, done.usage.input_tokens_details.cached_tokens) == (1000, 100)
    events = list(client.responses.create(model=MODEL, input="fix it", stream=True))
    assert events[-1].type == "response.completed" and events[-1].response.usage.output_tokens == 40


@pytest.fixture
def proxied(server, tmp_path):
    proxy = ModelProxy(tmp_path / "proxy", server.url, KEY, MODEL, load_prices(), api="openai").start()
    events = EventLog(tmp_path / "events.jsonl", "t/a/0")
    budget = Budget(BudgetLimits())
    proxy.attach(events, budget)
    client = openai.OpenAI(base_url="http://proxy/v1", api_key=proxy.token, max_retries=0,
                           http_client=httpx.Client(transport=httpx.HTTPTransport(uds=str(proxy.socket_path))))
    yield proxy, client, budget, tmp_path / "events.jsonl"
    proxy.stop()
    events.close()


@pytest.mark.parametrize("kind", ["chat", "chat-stream", "responses", "responses-stream"])
def test_the_proxy_records_and_charges_openai_calls(proxied, server, kind):
    proxy, client, budget, path = proxied
    if kind.startswith("chat"):
        answer = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS,
                                                stream=kind.endswith("stream"))  # a stream without include_usage
        if kind.endswith("stream"):
            list(answer)
    else:
        answer = client.responses.create(model=MODEL, input="fix it", stream=kind.endswith("stream"))
        if kind.endswith("stream"):
            list(answer)
    proxy.wait_idle()  # the agent may have read the whole answer before the proxy recorded it
    [call] = [e for e in read_events(path) if e["kind"] == "model_call"]
    assert (call["input_tokens"], call["cache_read_tokens"], call["output_tokens"]) == (900, 100, 40)
    assert call["api"] == "openai" and call["cost_usd"] == pytest.approx((900 * 3.0 + 100 * 0.3 + 40 * 15.0) / 1e6)
    assert call["content"] == [{"type": "text", "text": "Looking."}]  # what the model said is kept, in every format
    [tool] = [e for e in read_events(path) if e["kind"] == "model_tool_use"]
    assert tool["tool"] == "shell" and tool["arguments"] == {"command": ["bash", "-lc", "ls"]}
    assert budget.reported_tool_calls == 1 and budget.cost_usd == pytest.approx(call["cost_usd"])
    assert server.requests[KEY][-1]["model"] == MODEL  # relayed with the real key: the script was found by it


def test_the_openai_proxy_relays_only_openai_paths_and_the_pinned_model(proxied, server):
    proxy, client, budget, path = proxied
    with pytest.raises(openai.PermissionDeniedError):
        client.chat.completions.create(model="gpt-other", messages=MESSAGES)
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model=MODEL, input="x")
    assert budget.refused_requests == {"model_not_pinned": 1, "path_not_relayed": 1}
    assert server.requests[KEY] == []


def test_openai_models_are_priced_with_their_cached_input_apart():
    prices = load_prices()
    gpt5 = prices.price("gpt-5-2025-08-07")
    assert gpt5.cost(1_000_000, 1_000_000, 1_000_000, 0) == pytest.approx(1.25 + 10.0 + 0.125)
    assert {"gpt-4.1-2025-04-14", "o4-mini-2025-04-16"} <= set(prices.models)


def test_the_openai_proxy_refuses_server_side_tools_and_background_work(proxied, server):
    proxy, client, budget, path = proxied
    with pytest.raises(openai.PermissionDeniedError):
        client.responses.create(model=MODEL, input="x", tools=[{"type": "mcp", "server_label": "x",
                                                                 "server_url": "https://attacker.example/mcp",
                                                                 "require_approval": "never"}])
    with pytest.raises(openai.PermissionDeniedError):
        client.responses.create(model=MODEL, input="x", tools=[{"type": "web_search"}])
    with pytest.raises(openai.PermissionDeniedError):
        client.responses.create(model=MODEL, input="x", background=True)
    assert budget.refused_requests == {"server_side_tool": 3} and server.requests[KEY] == []
