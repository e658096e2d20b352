"""A scripted model server speaking the Anthropic Messages API, and OpenAI's Chat Completions and Responses APIs,
over real HTTP.

Tests and the offline demo point ``ANTHROPIC_BASE_URL`` at it. It answers
``POST /v1/messages`` (plain JSON, or server-sent events when ``stream`` is
true) from *scripts*: ordered lists of responses, one list per API key. A
request finds its trial's script by the key it presents (``x-api-key`` or
``Authorization: Bearer``), so concurrent trials each get their own; the key
is whatever the test or demo registered, never a real one.

Script format (YAML or JSON; ``trialbox model-server --script FILE``)::

    scripts:
      <api key>:
        - content:                     # the assistant's blocks, as the API returns them
            - {type: text, text: "Let me look."}
            - {type: tool_use, name: bash, input: {command: "ls"}}   # id made up when absent
          stop_reason: tool_use        # default: tool_use if a tool_use block is present, else end_turn
          usage: {input_tokens: 120, output_tokens: 30,
                  cache_read_input_tokens: 0, cache_creation_input_tokens: 0}   # default: estimated
          model: scripted-model-1      # the model it says it served (default: the one requested)
          delay_s: 0.5                 # wait before answering
        - error: {status: 429, type: rate_limit_error, message: slow down, retry_after: 0}
        - error: {status: 529, type: overloaded_error, message: busy}

A request finds its script by its API key and, when it carries the header
``x-trialbox-trial: <task>/<candidate>/<replicate>`` (trialbox's agents and
model proxy send it), by the most specific of ``<key>#<trial id>``,
``<key>#<task>/<candidate>``, ``<key>#<task>`` and ``<key>`` (so two designs on
the same model can be scripted apart, as an ablation needs). Each trial reads its script from the start
(a cursor per script and trial), so replicates replay the same script and
concurrent trials never take each other's answers; requests without the
header share one cursor per script. When a script runs out the server answers
with an ``end_turn`` text saying so. An unknown key gets a 401. Every request
received is kept (``requests[script name]``) for assertions.

The same scripts answer ``POST /v1/chat/completions`` and ``POST /v1/responses``
(``openai_wire`` renders the blocks: text as the message's content or an
``output_text``, ``tool_use`` as a function tool call; usage with the cache reads
counted inside the prompt tokens, as OpenAI counts them; streamed as chunks or
events when ``stream`` is true, a chat stream's usage only when
``stream_options.include_usage`` asks for it).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from . import openai_wire

_ids = itertools.count(1)
TRIAL_HEADER = "x-trialbox-trial"


def _estimate_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, default=str)) // 4)


class ScriptedModelServer:
    """A real HTTP server on ``host:port`` (port 0: any free one); start with ``start()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self._cursors: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add_script(self, key: str, responses: list[dict[str, Any]]) -> None:
        with self._lock:
            self.scripts[key] = list(responses)
            self.requests.setdefault(key, [])

    def load(self, path: Path) -> None:
        data = yaml.safe_load(Path(path).read_text())
        for key, responses in (data.get("scripts") or {}).items():
            self.add_script(str(key), responses)

    def start(self) -> "ScriptedModelServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="scripted-model")
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ScriptedModelServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ handling
    @staticmethod
    def _key(h: BaseHTTPRequestHandler) -> str:
        key = h.headers.get("x-api-key") or ""
        auth = h.headers.get("authorization") or ""
        return key or auth.removeprefix("Bearer ").strip()

    def _next(self, key: str, trial: str, body: dict[str, Any]) -> dict[str, Any] | None:
        parts = trial.split("/")
        names = ([f"{key}#{trial}", f"{key}#{'/'.join(parts[:2])}", f"{key}#{parts[0]}", key] if trial else [key])
        name = next((n for n in names if n in self.scripts), None)
        if name is None:
            return None
        with self._lock:
            self.requests.setdefault(name, []).append(body)
            cursor = (name, trial)
            index = self._cursors.get(cursor, 0)
            self._cursors[cursor] = index + 1
            if index < len(self.scripts[name]):
                return self.scripts[name][index]
        return {"content": [{"type": "text", "text": "(the script has no more responses)"}], "stop_reason": "end_turn"}

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        try:
            body = json.loads(h.rfile.read(length) or b"{}")
        except ValueError:
            return self._error(h, 400, "invalid_request_error", "body is not JSON")
        route = h.path.split("?")[0]
        if route not in ("/v1/messages", *openai_wire.PATHS):
            return self._error(h, 404, "not_found_error", f"no route {h.path}")
        entry = self._next(self._key(h), h.headers.get(TRIAL_HEADER) or "", body)
        if entry is None:
            return self._error(h, 401, "authentication_error", "unknown API key")
        time.sleep(float(entry.get("delay_s", 0)))
        if "error" in entry:
            e = entry["error"]
            headers = {"retry-after": str(e["retry_after"])} if "retry_after" in e else {}
            return self._error(h, int(e.get("status", 500)), e.get("type", "api_error"), e.get("message", "error"), headers)
        message = self._message(entry, body)
        if route == openai_wire.CHAT:
            if body.get("stream"):
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                return self._send(h, 200, openai_wire.chat_stream(message, include), "text/event-stream")
            return self._send(h, 200, json.dumps(openai_wire.chat_completion(message)).encode(), "application/json")
        if route == openai_wire.RESPONSES:
            if body.get("stream"):
                return self._send(h, 200, openai_wire.response_stream(message), "text/event-stream")
            return self._send(h, 200, json.dumps(openai_wire.response_object(message)).encode(), "application/json")
        if body.get("stream"):
            self._stream(h, message)
        else:
            self._send(h, 200, json.dumps(message).encode(), "application/json")

    def _message(self, entry: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        content = []
        for block in entry.get("content", []):
            block = dict(block)
            if block.get("type") == "tool_use":
                block.setdefault("id", f"toolu_{next(_ids):06d}")
                block.setdefault("input", {})
            content.append(block)
        has_tool = any(b.get("type") == "tool_use" for b in content)
        prompt = body.get("messages", body.get("input", []))
        usage = {"input_tokens": _estimate_tokens(prompt) + _estimate_tokens(body.get("system", body.get("instructions", ""))),
                 "output_tokens": _estimate_tokens(content), "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0}
        usage.update(entry.get("usage") or {})
        return {"id": f"msg_{next(_ids):06d}", "type": "message", "role": "assistant",
                "model": entry.get("model") or body.get("model", "scripted-model-1"), "content": content,
                "stop_reason": entry.get("stop_reason") or ("tool_use" if has_tool else "end_turn"),
                "stop_sequence": None, "usage": usage}

    def _send(self, h: BaseHTTPRequestHandler, status: int, data: bytes, ctype: str,
              headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        h.send_header("request-id", f"req_scripted_{next(_ids):06d}")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _error(self, h: BaseHTTPRequestHandler, status: int, kind: str, message: str,
               headers: dict[str, str] | None = None) -> None:
        data = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        self._send(h, status, data, "application/json", headers)

    def _stream(self, h: BaseHTTPRequestHandler, message: dict[str, Any]) -> None:
        events: list[tuple[str, dict[str, Any]]] = []
        start = dict(message, content=[], stop_reason=None)
        start["usage"] = dict(message["usage"], output_tokens=1)
        events.append(("message_start", {"type": "message_start", "message": start}))
        for i, block in enumerate(message["content"]):
            if block["type"] == "tool_use":
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": dict(block, input={})}))
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                delta = {"type": "text_delta", "text": block.get("text", "")}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                         "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
        events.append(("message_stop", {"type": "message_stop"}))
        data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
        self._send(h, 200, data, "text/event-stream")
