"""The recording model proxy: an Anthropic-Messages-compatible reverse proxy on a Unix socket.

A command-line agent inside the sandbox has no network interface but
loopback; its only way out is this proxy's socket, mounted into the
container (``/run/trialbox/model.sock``, with ``forwarder.py`` beside it for
agents that want an HTTP URL). The container gets a per-trial token, never
the real key: the proxy checks the token, swaps in the real key on the
upstream side (httpx), and relays the answer (streamed or not). For every
request it records, on the host, a ``model_call`` event with usage, cost and
the answer's text (``content``: its text and thinking blocks, bounded by
``upstream.MAX_TEXT_CHARS``), the tool names the request offered (``tools_offered``: what the agent can
express, for the trajectory constraints; source ``harness``: observed by trialbox) and one ``model_tool_use`` event
per tool_use block of the answer (source ``model_reported``: what the model
says it called, not what ran). It enforces the trial's token, cost and
tool-call budgets by refusing further requests (HTTP 403,
``trialbox_budget_exhausted``) and remembers which budget ended the trial.

What real clients send is relayed as they send it: the query string
(``?beta=true``), the headers that change the API's behaviour, and token
counting (``/v1/messages/count_tokens``: recorded as ``model_count_tokens``,
never charged). Upstream answers are asked for uncompressed and decoded
whatever comes, so the agent and the usage count both read plain bytes.
Reachability probes (``HEAD /api/hello``) are answered here (``proxy_probe``).
Every request the proxy refuses (another path, another method, an unknown
token, a trial not started yet) is recorded as ``proxy_refused`` with its
method, path and reason; nothing refused leaves no trace.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from ..events import EventLog, now_iso
from ..canaries import find as find_canaries, json_unescaped
from ..canaryscan import fold
from ..errors import AgentStop
from .budget import Budget, StopReason
from . import anthropic_wire, openai_wire
from .proxyreplies import ALLOWED_PATHS, ProxyReplies
from .upstream import AUTH, MISMATCH, UPSTREAM_ERROR, bounded_text, describe, error_fields, is_served_as, trial_fault
from .prices import PriceTable
from ..toolnames import offered_tools

SOCKET_NAME = "model.sock"
FORWARDER = Path(__file__).with_name("incontainer") / "forwarder.py"
PASS_HEADERS = ("content-type", "anthropic-version", "anthropic-beta", "openai-beta", "accept")
MESSAGES, COUNT_TOKENS = anthropic_wire.MESSAGES, anthropic_wire.COUNT_TOKENS


def outgoing_texts(body: bytes) -> list[str]:
    """The ways a request body's text reaches the provider: as sent; with JSON's string escapes decoded (the
    provider's parser reads ``\\u0074`` as ``t``), again for a JSON string inside a string, up to three layers;
    and each of these folded to plain ASCII letters when it has other characters (zero-width characters between
    a canary's, fullwidth forms)."""
    text = body.decode("utf-8", errors="replace")
    texts = [text]
    for _ in range(3):
        decoded = json_unescaped(texts[-1])
        if decoded == texts[-1]:
            break
        texts.append(decoded)
    return texts + [fold(t) for t in texts if not t.isascii()]



class DuplicateKey(ValueError):
    """A JSON object of a request names one key twice (its name is the message)."""


def _without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    """``json.loads``'s object hook: a key named twice in one object is refused. Python keeps the last of
    duplicates, other parsers the first: the proxy would check one request and relay another."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out

class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class ModelProxy(ProxyReplies):
    """One trial's proxy: ``start()`` before the sandbox is created, ``attach()`` when the agent runs."""

    def __init__(self, folder: Path, upstream: str, real_key: str, model: str | None, prices: PriceTable,
                 api: str = "anthropic", aliases: tuple[str, ...] = ()) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o755)
        shutil.copyfile(FORWARDER, self.folder / FORWARDER.name)
        os.chmod(self.folder / FORWARDER.name, 0o755)
        self.socket_path = self.folder / SOCKET_NAME
        self.upstream = upstream.rstrip("/")
        self.real_key = real_key
        self.model = model
        self.aliases = tuple(aliases)
        """Names the provider may answer with for the pinned model (the manifest's ``model_aliases``)."""
        self.prices = prices
        self.api = api
        self.token = "tbx-" + secrets.token_hex(16)
        self.events: EventLog | None = None
        self.canaries: list[str] = []
        self.trial_id = ""
        self.budget: Budget | None = None
        self.stop_reason: AgentStop | None = None
        self.model_tool_uses = 0
        self.exchanges: list[dict[str, Any]] = []
        """Each relayed model request's end, in order: an answer (``model_call``) or an upstream error."""
        self.refused: list[dict[str, Any]] = []
        """Requests refused before the trial's event log was attached (recorded when it is)."""
        self.in_flight = 0
        self._lock = threading.Lock()
        self._record_lock = threading.Lock()
        self._http = httpx.Client(timeout=httpx.Timeout(600.0, connect=30.0))
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection; streams end with the connection

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                proxy._handle(self)

            def do_HEAD(self) -> None:  # noqa: N802
                proxy._probe(self)

            def do_GET(self) -> None:  # noqa: N802
                proxy._probe(self)

            def _refuse_method(self) -> None:
                proxy._refuse(self, 405, "invalid_request_error", "method_not_relayed",
                              f"trialbox proxy: {self.command} is not relayed")

            do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_CONNECT = do_TRACE = _refuse_method  # recorded refusals

        self.socket_path.unlink(missing_ok=True)
        self.server = _UnixHTTPServer(str(self.socket_path), Handler)
        os.chmod(self.socket_path, 0o666)
        self._thread: threading.Thread | None = None

    def start(self) -> "ModelProxy":
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="model-proxy")
        self._thread.start()
        return self

    def attach(self, events: EventLog, budget: Budget, canaries: list[str] | None = None, trial_id: str = "") -> None:
        self.events, self.budget, self.canaries, self.trial_id = events, budget, list(canaries or []), trial_id
        with self._record_lock:
            for event in self.refused:
                events.append("proxy_refused", **event)
                self._count_refusal(event["reason"])
            self.refused.clear()

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for a serve_forever that never started otherwise
            self.server.shutdown()
        self.server.server_close()
        self._http.close()
        self.socket_path.unlink(missing_ok=True)

    def _admit(self, h: BaseHTTPRequestHandler) -> bool:
        presented = h.headers.get("x-api-key") or (h.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if not secrets.compare_digest(presented, self.token):
            self._refuse(h, 401, "authentication_error", "unknown_token", "trialbox proxy: unknown token")
            return False
        if self.events is None or self.budget is None:
            self._refuse(h, 503, "api_error", "trial_not_started", "trialbox proxy: the trial has not started")
            return False
        try:
            if self.stop_reason is not None:
                raise self.stop_reason
            self.budget.check_model_budget()
            if self.model_tool_uses >= self.budget.limits.max_tool_calls:
                raise AgentStop(StopReason.MAX_TOOL_CALLS, f"{self.model_tool_uses} tool calls reported by the model")
        except AgentStop as stop:
            self.stop_reason = self.stop_reason or stop
            self.events.append("model_refused", reason=stop.reason.value, detail=stop.detail)
            self._count_refusal(stop.reason.value)
            self._reply(h, 403, "trialbox_budget_exhausted", f"trialbox: {stop.reason.value}: {stop.detail}")
            return False
        return True

    def _upstream_url(self, path: str) -> httpx.URL | None:
        """The upstream URL for an allowed request path, its query string kept (``?beta=true`` changes what the
        API does); the host always stays the configured one."""
        route, _, query = path.partition("?")
        if route not in ALLOWED_PATHS[self.api]:
            return None
        base = httpx.URL(self.upstream)
        try:
            return base.copy_with(path=base.path.rstrip("/") + route, query=query.encode() or None)
        except httpx.InvalidURL:  # a query no URL can carry: refused like an unknown path
            return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("content-length") or 0))
        url = self._upstream_url(h.path)
        if url is None:
            self._refuse(h, 404, "not_found_error", "path_not_relayed",
                         f"trialbox proxy: only POST {' and '.join(sorted(ALLOWED_PATHS[self.api]))} are relayed")
            return
        if not self._admit(h):
            return
        try:
            request = json.loads(body or b"{}", object_pairs_hook=_without_duplicates)
        except DuplicateKey as exc:  # one reading is checked, the provider may act on another: never relayed
            self.events.append("model_refused", reason="duplicate_key", detail=str(exc)[:100])
            self._count_refusal("duplicate_key")
            self._reply(h, 400, "invalid_request_error", f"trialbox proxy: the request repeats the key {str(exc)[:100]!r}"
                                                         " in one object: what is checked and what a provider reads "
                                                         "could differ, so it is not relayed")
            return
        except ValueError:
            request = None
        except RecursionError:  # nested deeper than can be checked here: not sent unchecked
            self.events.append("model_refused", reason="request_unreadable", detail="nested too deeply to check")
            self._count_refusal("request_unreadable")
            self._reply(h, 403, "invalid_request_error", "trialbox proxy: the request is nested too deeply to check")
            return
        request = request if isinstance(request, dict) else {}
        if self.model and request.get("model") != self.model:
            self.events.append("model_refused", reason="model_not_pinned", detail=str(request.get("model"))[:100])
            self._count_refusal("model_not_pinned")
            self._reply(h, 403, "permission_error", f"trialbox proxy: this trial's model is {self.model}")
            return
        wire = openai_wire if self.api == "openai" else anthropic_wire
        reaching = wire.server_side(request)
        if reaching:  # the provider would reach out or act for the agent: the network policy forbids it
            self.events.append("model_refused", reason="server_side_tool", detail=", ".join(reaching)[:200])
            self._count_refusal("server_side_tool")
            self._reply(h, 403, "permission_error", "trialbox proxy: server-side tools are not relayed "
                                                    f"({', '.join(reaching)[:200]}): the sandbox has no network")
            return
        fetched = wire.provider_fetches(request)
        if fetched:  # the provider would fetch a URL of the agent's choosing for it: the network policy forbids it
            self.events.append("model_refused", reason="provider_fetch", detail=", ".join(fetched)[:200])
            self._count_refusal("provider_fetch")
            self._reply(h, 403, "permission_error", "trialbox proxy: content with a URL source is not relayed "
                                                    f"({', '.join(fetched)[:200]}): the sandbox has no network")
            return
        relayed = [h.path] + [h.headers.get(k) or "" for k in PASS_HEADERS]  # every part of the request that leaves
        found = find_canaries(self.canaries, "\n".join([*outgoing_texts(body), *relayed]))
        if found:  # a planted secret on its way out: recorded, and never forwarded
            self.events.append("egress_canary", found=len(found), bytes=len(body))
            self._count_refusal("secret_in_request")
            self._reply(h, 403, "trialbox_secret_blocked", "trialbox: the request carried a secret and was not sent")
            return
        started, t0 = now_iso(), time.monotonic()
        with self._lock:
            self.in_flight += 1
        try:
            self._relay(h, url, body, request, started, t0)
        finally:
            with self._lock:
                self.in_flight -= 1

    def fault(self) -> str | None:
        """Why the model side failed this trial (``upstream.trial_fault`` over what this proxy recorded), or None."""
        return trial_fault(self.exchanges)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until no request is in flight (so every call is recorded before the result is built)."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)

    def _relay(self, h: BaseHTTPRequestHandler, url: httpx.URL, body: bytes, request: dict[str, Any], started: str,
               t0: float) -> None:
        headers = {k: h.headers[k] for k in PASS_HEADERS if h.headers.get(k)}
        if self.api == "openai":
            headers["authorization"] = f"Bearer {self.real_key}"
            body = openai_wire.with_stream_usage(url.path, body)  # a stream's usage is only sent when asked for
        else:
            headers["x-api-key"] = self.real_key
        headers["accept-encoding"] = "identity"  # and whatever comes encoded anyway is decoded below
        if self.trial_id:
            headers["x-trialbox-trial"] = self.trial_id
        status: int | str = 502
        request_id, received = None, bytearray()
        try:
            with self._http.stream("POST", url, content=body, headers=headers) as up:
                status, request_id = up.status_code, up.headers.get("request-id")
                h.send_response(up.status_code)
                for k in ("content-type", "request-id", "retry-after"):
                    if k in up.headers:
                        h.send_header(k, up.headers[k])
                h.end_headers()
                for chunk in up.iter_bytes():  # decoded: the agent gets (and usage is read from) plain bytes
                    received += chunk
                    try:
                        h.wfile.write(chunk)
                        h.wfile.flush()
                    except OSError:
                        pass  # the agent hung up; the model still answered and is still charged
        except httpx.HTTPError as exc:
            status = "connection" if not received else 502  # never reached, or cut off mid-answer
            try:
                self._reply(h, 502, "api_error", f"trialbox proxy: upstream failed: {type(exc).__name__}")
            except OSError:
                pass
        finally:
            self._record(request, bytes(received), status, request_id, started, t0, url.path)

    def _record(self, request: dict[str, Any], received: bytes, status: int | str, request_id: str | None,
                started: str, t0: float, path: str) -> None:
        """Record one relayed call (``request``: its body as parsed once, in ``_handle``). An error answer is a
        ``model_upstream_error``; one refusing the run's credentials (401/403) stops the trial at once, every later
        request refused here, so no agent spends minutes retrying a key that cannot work (``upstream.run_fault``
        then stops the run)."""
        counting = path.endswith(COUNT_TOKENS)
        if status != 200:
            fields = error_fields(status, bytes(received[:65536]))
            with self._record_lock:
                self.events.append(UPSTREAM_ERROR, **fields, request_id=request_id, api=self.api,
                                   latency_s=round(time.monotonic() - t0, 6), started_at=started, ended_at=now_iso())
                if not counting:
                    self.exchanges.append({"kind": UPSTREAM_ERROR, **fields})
                if status in AUTH and not counting:
                    self.stop_reason = self.stop_reason or AgentStop(
                        StopReason.MODEL_ERROR, f"the provider refused the run's credentials ({describe(fields)})")
            return
        if counting:  # counting tokens is free: recorded, never charged
            try:
                counted = json.loads(received).get("input_tokens")
            except (ValueError, AttributeError, RecursionError):
                counted = None
            self.events.append("model_count_tokens", model_requested=request.get("model"), input_tokens=counted,
                               request_id=request_id, latency_s=round(time.monotonic() - t0, 6))
            return
        wire = openai_wire if self.api == "openai" else anthropic_wire
        answer = wire.read_answer(path, received)
        tin, tout, cread, cwrite = answer["usage"]
        served = answer["model"] or request.get("model", "")
        price_model = self.model or served  # the pinned model's price: another name that answers is refused below
        cost = self.prices.price(price_model).cost(tin, tout, cread, cwrite) if price_model in self.prices.models else 0.0
        content, cut = bounded_text(answer["text"])
        with self._record_lock:
            self.budget.charge_model(tin, tout, cread, cwrite, cost)
            self.exchanges.append({"kind": "model_call"})
            self.events.append(
                "model_call", model_requested=request.get("model"), model_served=served, request_id=request_id,
                content=content, **({"text_truncated": cut} if cut else {}), tools_offered=offered_tools(request),
                input_tokens=tin, output_tokens=tout, cache_read_tokens=cread, cache_write_tokens=cwrite,
                latency_s=round(time.monotonic() - t0, 6), stop_reason=answer["stop_reason"], retries=0,
                cost_usd=round(cost, 8), priced=price_model in self.prices.models, streamed=bool(request.get("stream")),
                api=self.api, started_at=started, ended_at=now_iso())
            for name, arguments, use_id in answer["tool_uses"]:
                self.model_tool_uses += 1
                self.budget.reported_tool_calls += 1
                self.events.append("model_tool_use", source="model_reported", tool=name, arguments=arguments,
                                   tool_use_id=use_id)
            if not is_served_as(self.model, answer["model"], self.aliases):  # another model answered: the run's
                self.events.append(MISMATCH, pinned=self.model, served=answer["model"])  # configuration, not the agent
                self.stop_reason = self.stop_reason or AgentStop(
                    StopReason.MODEL_ERROR, f"the provider answered with model {answer['model']!r}, not {self.model!r}")
            try:
                self.budget.check_after_model()
            except AgentStop as stop:
                self.stop_reason = self.stop_reason or stop
