"""The Anthropic Messages wire format as the recording proxy reads it back: an answer, plain or streamed, in
trialbox's terms (the OpenAI formats are in ``openai_wire``)."""

from __future__ import annotations

import json
from typing import Any

from ..textsafe import loads_bounded

MESSAGES, COUNT_TOKENS = "/v1/messages", "/v1/messages/count_tokens"
PATHS = (MESSAGES, COUNT_TOKENS)


def parse_sse(data: bytes) -> dict[str, Any] | None:
    """Rebuild the final message from a Messages API event stream (None if it is not one)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for chunk in data.decode("utf-8", errors="replace").split("\n\n"):
        line = next((ln[5:].strip() for ln in chunk.splitlines() if ln.startswith("data:")), None)
        if not line:
            continue
        try:
            ev = loads_bounded(line)  # a model's answer nested thousands deep is read to a depth, never raises
        except ValueError:
            continue
        kind = ev.get("type")
        if kind == "message_start":
            message = ev["message"]
        elif kind == "content_block_start":
            blocks[ev["index"]] = dict(ev["content_block"])
        elif kind == "content_block_delta":
            d = ev["delta"]
            if d.get("type") == "text_delta":
                blocks[ev["index"]]["text"] = blocks[ev["index"]].get("text", "") + d.get("text", "")
            elif d.get("type") == "thinking_delta":
                blocks[ev["index"]]["thinking"] = blocks[ev["index"]].get("thinking", "") + d.get("thinking", "")
            elif d.get("type") == "input_json_delta":
                partial[ev["index"]] = partial.get(ev["index"], "") + d.get("partial_json", "")
        elif kind == "message_delta" and message is not None:
            message.update({k: v for k, v in ev.get("delta", {}).items() if v is not None})
            message.setdefault("usage", {}).update({k: v for k, v in (ev.get("usage") or {}).items() if v is not None})
    if message is None:
        return None
    for i, text in partial.items():
        try:
            blocks[i]["input"] = loads_bounded(text) if text else {}
        except ValueError:
            blocks[i]["input"] = {"_unparsed": text}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


CLIENT_TOOL_PREFIXES = ("bash_", "text_editor_", "computer_", "memory_")
"""Anthropic-defined tools the *client* runs (in the sandbox): allowed beside the agent's own (untyped) tools."""


def server_side(request: dict[str, Any]) -> list[str]:
    """What in a request would have the model provider reach out for the agent (web search or fetch, code
    execution, MCP servers): the proxy refuses it, as the sandbox's network policy would."""
    found = ["mcp_servers"] if request.get("mcp_servers") else []
    for tool in request.get("tools") or []:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in (None, "custom") and not str(kind).startswith(CLIENT_TOOL_PREFIXES):
            found.append(str(kind))
    return found


MAX_WALKED = 1_000_000
"""Values of a request walked for sources the provider would fetch; a request with more is refused unchecked."""


def provider_fetches(request: dict[str, Any]) -> list[str]:
    """The content blocks of a request whose source is a URL (an image or a document, at any depth: in a tool
    result, in a document's content): the provider would fetch it, from a server of the agent's choosing. The
    proxy refuses them as it refuses server-side tools. A tool call's ``input`` (what the model asked the
    client to run) is not a source and is not walked."""
    found: list[str] = []
    stack: list[Any] = [request.get("messages"), request.get("system")]
    walked = 0
    while stack:
        item = stack.pop()
        walked += 1
        if walked > MAX_WALKED:
            return [f"a request of more than {MAX_WALKED} values (not checked)"]
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            source = item.get("source")
            if item.get("type") == "url" or isinstance(source, dict) and source.get("type") == "url":
                found.append(f"{item.get('type')} block with a url source")
                if len(found) >= 20:
                    break
            stack.extend(v for k, v in item.items() if not (k == "input" and item.get("type") == "tool_use"))
    return found


def read_answer(path: str, received: bytes) -> dict[str, Any]:
    """What a Messages answer says: ``model``, ``stop_reason``, ``usage`` (input, output, cache_read,
    cache_write), ``tool_uses`` (name, input, id) and ``text`` (its ``text`` and ``thinking`` blocks)."""
    try:
        message = loads_bounded(received)
    except ValueError:
        message = parse_sse(received) or {}
    usage = message.get("usage") or {}
    blocks = message.get("content") if isinstance(message.get("content"), list) else []
    return {"model": message.get("model"), "stop_reason": message.get("stop_reason"),
            "text": [{"type": b["type"], b["type"]: b[b["type"]]} for b in blocks if isinstance(b, dict)
                     and b.get("type") in ("text", "thinking") and isinstance(b.get(b["type"]), str)],
            "usage": (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
                      int(usage.get("cache_read_input_tokens") or 0), int(usage.get("cache_creation_input_tokens") or 0)),
            "tool_uses": [(b.get("name"), b.get("input"), b.get("id")) for b in message.get("content") or []
                          if b.get("type") == "tool_use"]}
