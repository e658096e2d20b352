"""The OpenAI wire formats trialbox speaks: Chat Completions and Responses, plain and streamed.

Both sides use this module: the scripted model server renders a scripted answer (Messages-API content blocks:
``text`` and ``tool_use``) in either format, and the recording proxy reads usage and tool calls back out of
whatever an upstream answered. Usage is normalised to trialbox's terms: ``input`` is the uncached prompt tokens
(OpenAI counts cached tokens inside ``prompt_tokens`` / ``input_tokens``), ``cache_read`` the cached ones,
``cache_write`` 0 (OpenAI charges no cache write).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from ..textsafe import loads_bounded

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
PATHS = (CHAT, RESPONSES)
_ids = itertools.count(1)


def _tool_calls(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b.get("type") == "tool_use"]


def _text(content: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def _openai_usage(usage: dict[str, Any], responses: bool) -> dict[str, Any]:
    cached = int(usage.get("cache_read_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + cached
    out = int(usage.get("output_tokens") or 0)
    if responses:
        return {"input_tokens": prompt, "output_tokens": out, "total_tokens": prompt + out,
                "input_tokens_details": {"cached_tokens": cached}, "output_tokens_details": {"reasoning_tokens": 0}}
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": cached}}


# ---------------------------------------------------------------------------- rendering (the scripted server)
def chat_completion(message: dict[str, Any]) -> dict[str, Any]:
    """A Messages-API message (as the scripted server builds it) as a Chat Completions answer."""
    calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
             for b in _tool_calls(message["content"])]
    reply: dict[str, Any] = {"role": "assistant", "content": _text(message["content"]) or None}
    if calls:
        reply["tool_calls"] = calls
    return {"id": f"chatcmpl-{next(_ids):06d}", "object": "chat.completion", "created": 0, "model": message["model"],
            "choices": [{"index": 0, "message": reply, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": _openai_usage(message["usage"], responses=False)}


def chat_stream(message: dict[str, Any], include_usage: bool) -> bytes:
    """The same answer as Chat Completions chunks (usage in a last chunk only when the client asked for it)."""
    full = chat_completion(message)
    base = {"id": full["id"], "object": "chat.completion.chunk", "created": 0, "model": full["model"]}
    reply = full["choices"][0]["message"]
    chunks = [{"role": "assistant", "content": ""}]
    if reply["content"]:
        chunks.append({"content": reply["content"]})
    for i, call in enumerate(reply.get("tool_calls") or []):
        chunks.append({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"], "arguments": ""}}]})
        chunks.append({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
    events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in chunks]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": full["choices"][0]["finish_reason"]}]})
    if include_usage:
        events.append({**base, "choices": [], "usage": full["usage"]})
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def response_object(message: dict[str, Any]) -> dict[str, Any]:
    """The same answer as a Responses API response."""
    output: list[dict[str, Any]] = []
    text = _text(message["content"])
    if text:
        output.append({"type": "message", "id": f"msg_{next(_ids):06d}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for b in _tool_calls(message["content"]):
        output.append({"type": "function_call", "id": f"fc_{next(_ids):06d}", "call_id": b["id"], "name": b["name"],
                       "arguments": json.dumps(b["input"]), "status": "completed"})
    return {"id": f"resp_{next(_ids):06d}", "object": "response", "created_at": 0, "status": "completed",
            "model": message["model"], "output": output, "usage": _openai_usage(message["usage"], responses=True),
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def response_stream(message: dict[str, Any]) -> bytes:
    """The same response as Responses API events, ``response.completed`` carrying it whole."""
    full = response_object(message)
    seq = itertools.count()
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {**full, "status": "in_progress",
                                                                              "output": [], "usage": None}}]
    for i, item in enumerate(full["output"]):
        events.append({"type": "response.output_item.added", "output_index": i,
                       "item": {**item, "status": "in_progress",
                                **({"content": []} if item["type"] == "message" else {"arguments": ""})}})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append({"type": "response.output_text.delta", "item_id": item["id"], "output_index": i,
                           "content_index": 0, "delta": text})
            events.append({"type": "response.output_text.done", "item_id": item["id"], "output_index": i,
                           "content_index": 0, "text": text})
        else:
            events.append({"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": i,
                           "delta": item["arguments"]})
            events.append({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": i,
                           "arguments": item["arguments"]})
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": full})
    return "".join(f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': next(seq)})}\n\n"
                   for e in events).encode()


CLIENT_TOOLS = ("function", "custom", "local_shell")
"""Tool types the *client* runs (in the sandbox); every other type has the provider act for the agent."""


NAMESPACE_DEPTH = 8
"""Namespaces within namespaces judged this deep; one nested deeper is refused as what it cannot be shown not
to hold (walked without recursion: no depth the agent sends exhausts the proxy's recursion limit)."""


def _server_tools(tools: list[Any]) -> list[str]:
    """The tool types not run by the client; a ``namespace`` groups tools and is judged by what it holds."""
    found = []
    pending = [(tools, 0)]
    while pending:
        group, depth = pending.pop(0)
        for t in group if isinstance(group, list) else []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                if depth + 1 >= NAMESPACE_DEPTH:
                    found.append(f"namespace nested deeper than {NAMESPACE_DEPTH}")
                else:
                    pending.append((t.get("tools") or [], depth + 1))
            elif t.get("type") not in CLIENT_TOOLS:
                found.append(str(t.get("type")))
    return found


def server_side(request: dict[str, Any]) -> list[str]:
    """What in a request would have the provider reach out or act for the agent (web search, file search, MCP
    servers, code interpreter, image generation), or be charged out of sight (``background``): refused."""
    found = _server_tools(request.get("tools") or [])
    found += [key for key in ("web_search_options", "background") if request.get(key)]
    return found


URL_KEYS = ("image_url", "file_url", "audio_url", "video_url", "document_url")
"""Where a content part names something for the provider to fetch; only a ``data:`` URL (the bytes themselves)
is not fetched."""
MAX_WALKED = 1_000_000


def provider_fetches(request: dict[str, Any]) -> list[str]:
    """The content parts of a request (Chat Completions ``messages``, Responses ``input``) that have the provider
    fetch a URL (``image_url``, ``input_image``, ``input_file`` with a ``file_url``…): refused, as server-side
    tools are. A ``data:`` URL carries its bytes and is relayed."""
    found: list[str] = []
    stack: list[Any] = [request.get("messages"), request.get("input"), request.get("instructions")]
    walked = 0
    while stack:
        item = stack.pop()
        walked += 1
        if walked > MAX_WALKED:
            return [f"a request of more than {MAX_WALKED} values (not checked)"]
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key in URL_KEYS:
                value = item.get(key)
                url = value.get("url") if isinstance(value, dict) else value
                if isinstance(url, str) and url.strip() and not url.strip().lower().startswith("data:"):
                    found.append(f"{item.get('type') or key} with a url")
            if len(found) >= 20:
                break
            stack.extend(item.values())
    return found


def with_stream_usage(path: str, body: bytes) -> bytes:
    """A streamed Chat Completions request asks for its usage (``stream_options.include_usage``): without it the
    stream carries none, and the call could not be charged. Any other request is relayed as it came."""
    if not path.endswith(CHAT):
        return body
    try:
        request = json.loads(body or b"{}")
    except (ValueError, RecursionError):  # not JSON, or nested too deep to be anything a provider takes
        return body
    options = request.get("stream_options") if isinstance(request, dict) else None
    if not isinstance(request, dict) or not request.get("stream") or \
            (isinstance(options, dict) and options.get("include_usage")):
        return body
    request["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return json.dumps(request).encode()


# ---------------------------------------------------------------------------- reading back (the proxy)
def _sse(data: bytes) -> list[Any]:
    out = []
    for chunk in data.decode("utf-8", errors="replace").split("\n\n"):
        for line in chunk.splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    out.append(loads_bounded(line[5:].strip()))
                except ValueError:
                    pass
    return out


def _arguments(text: str) -> Any:
    try:
        return loads_bounded(text) if text else {}
    except ValueError:
        return {"_unparsed": text}


def read_answer(path: str, received: bytes) -> dict[str, Any]:
    """What an OpenAI-format answer says, in trialbox's terms: ``model``, ``stop_reason``, ``usage`` (input,
    output, cache_read, cache_write), ``tool_uses`` (name, input, id) and ``text`` (the answer's text, and a
    Responses reasoning summary, as ``text`` and ``thinking`` blocks), plain or streamed."""
    try:
        answer: Any = loads_bounded(received)  # nested thousands deep: read to a depth, never raises
    except ValueError:
        answer = None
    if path.endswith(RESPONSES):
        if answer is None:
            done = [e for e in _sse(received) if e.get("type") in ("response.completed", "response.incomplete")]
            answer = done[-1]["response"] if done else {}
        usage = answer.get("usage") or {}
        cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
        text = [{"type": "text", "text": c["text"]} for o in answer.get("output") or [] if o.get("type") == "message"
                for c in o.get("content") or [] if isinstance(c, dict) and isinstance(c.get("text"), str)]
        text += [{"type": "thinking", "thinking": c["text"]} for o in answer.get("output") or []
                 if o.get("type") == "reasoning" for c in o.get("summary") or []
                 if isinstance(c, dict) and isinstance(c.get("text"), str)]
        tools = [(o.get("name") or o.get("type"),
                  o["action"] if isinstance(o.get("action"), dict) else _arguments(o.get("arguments") or o.get("input") or ""),
                  o.get("call_id")) for o in answer.get("output") or []
                 if o.get("type") in ("function_call", "custom_tool_call", "local_shell_call")]
        return {"model": answer.get("model"), "stop_reason": answer.get("status"), "tool_uses": tools, "text": text,
                "usage": (int(usage.get("input_tokens") or 0) - cached, int(usage.get("output_tokens") or 0), cached, 0)}
    if answer is None:  # chat chunks: tool calls assembled by index, usage from the chunk that has it
        chunks = _sse(received)
        calls: dict[int, dict[str, str]] = {}
        finish, usage, model, said = None, {}, None, []
        for c in chunks:
            model = c.get("model") or model
            usage = c.get("usage") or usage
            for choice in c.get("choices") or []:
                finish = choice.get("finish_reason") or finish
                piece = (choice.get("delta") or {}).get("content")
                if isinstance(piece, str):
                    said.append(piece)
                for tc in (choice.get("delta") or {}).get("tool_calls") or []:
                    call = calls.setdefault(int(tc.get("index") or 0), {"id": None, "name": "", "arguments": ""})
                    fn = tc.get("function") or {}
                    call["id"] = tc.get("id") or call["id"]
                    call["name"] += fn.get("name") or ""
                    call["arguments"] += fn.get("arguments") or ""
        answer = {"model": model, "usage": usage, "choices": [{"finish_reason": finish, "message": {
            "content": "".join(said), "tool_calls": [{"id": c.pop("id"), "function": c} for _, c in sorted(calls.items())]}}]}
    usage = answer.get("usage") or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    choices = answer.get("choices") or [{}]
    choice = choices[0]
    tools = [((tc.get("function") or {}).get("name"), _arguments((tc.get("function") or {}).get("arguments") or ""),
              tc.get("id")) for c in choices for tc in (c.get("message") or {}).get("tool_calls") or []]
    text = [{"type": "text", "text": (c.get("message") or {})["content"]} for c in choices
            if isinstance((c.get("message") or {}).get("content"), str) and c["message"]["content"]]
    return {"model": answer.get("model"), "stop_reason": choice.get("finish_reason"), "tool_uses": tools, "text": text,
            "usage": (int(usage.get("prompt_tokens") or 0) - cached, int(usage.get("completion_tokens") or 0), cached, 0)}
