"""What the recording model proxy answers itself: errors, refusals (each recorded with its method, path and reason,
and counted in the trial's budget), and reachability probes (answered locally, recorded).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from . import anthropic_wire, openai_wire

ALLOWED_PATHS = {"anthropic": set(anthropic_wire.PATHS), "openai": set(openai_wire.PATHS)}
"""What each API's proxy relays: nothing else, no other endpoint, no other host."""
MAX_REFUSAL_EVENTS = 500
"""Refused requests recorded one by one per trial; past this they are only counted (by reason)."""
PROBE_PATHS = {"/", "/api/hello"}
"""What clients probe for reachability (Claude Code sends ``HEAD /api/hello``): answered here, never relayed."""


class ProxyReplies:
    """The replies part of ``ModelProxy`` (a mixin: it uses the proxy's ``events``, ``budget``, ``refused`` and
    ``_record_lock``)."""

    def _reply(self, h: BaseHTTPRequestHandler, status: int, kind: str, message: str) -> None:
        data = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _refuse(self, h: BaseHTTPRequestHandler, status: int, kind: str, reason: str, message: str) -> None:
        """Refuse a request, and record it (method, path, reason): a refusal never leaves no trace."""
        event = {"method": h.command, "path": h.path[:300], "status": status, "reason": reason}
        with self._record_lock:
            if self.events is not None:
                recorded = sum(self.budget.refused_requests.values()) if self.budget is not None else 0
                if recorded < MAX_REFUSAL_EVENTS:  # past it, refusals are counted, not each logged
                    self.events.append("proxy_refused", **event)
                self._count_refusal(reason)
            elif len(self.refused) < 1000:
                self.refused.append(event)
        self._reply(h, status, kind, message)

    def _count_refusal(self, reason: str) -> None:
        if self.budget is not None:
            self.budget.refused_requests[reason] = self.budget.refused_requests.get(reason, 0) + 1

    def _probe(self, h: BaseHTTPRequestHandler) -> None:
        """A reachability probe (``HEAD /api/hello``) is answered here with an empty 200; anything else a
        client GETs is refused. Both are recorded."""
        if h.path.split("?", 1)[0] not in PROBE_PATHS:
            self._refuse(h, 404, "not_found_error", "path_not_relayed",
                         f"trialbox proxy: only POST {' and '.join(sorted(ALLOWED_PATHS[self.api]))} are relayed")
            return
        with self._record_lock:
            if self.events is not None:
                self.events.append("proxy_probe", method=h.command, path=h.path[:300])
        h.send_response(200)
        h.send_header("content-length", "0")
        h.end_headers()
