"""The host-side event log: append-only JSONL, hash-chained.

One line per event, written by the harness on the host where the agent cannot
reach. Every event carries ``seq`` (0, 1, 2, …), ``prev_hash`` (the ``hash`` of
the line before; 64 zeros for the first) and ``hash`` = sha256 of the event's
canonical JSON (sorted keys, no spaces) without its own ``hash``. An edited
line breaks its own hash; a removed or inserted line breaks ``seq`` and the
chain. The last line is a ``log_closed`` event with the count, so a truncated
tail is detected too; callers keep its hash (``EventLog.head``) as an anchor.

Event schema (fields beyond ``seq``, ``prev_hash``, ``hash``, ``kind``, ``source``):

=================  ===========================================================
kind               fields
=================  ===========================================================
``log_opened``     ``trial_id``, ``schema_version``
``tool_started``   ``tool``, ``arguments``, ``started_at``: written before the
                   call runs (a call that never returned is still seen)
``tool``           ``tool``, ``arguments``, ``started_seq``, ``output`` (truncated),
                   ``output_size`` (bytes, full), ``exit_code`` (bash, else
                   null), ``error`` (bool), ``error_kind``, ``timed_out``,
                   ``started_at``, ``ended_at`` (host wall clock, ISO-8601),
                   ``duration_s`` (host monotonic clock)
``model_call``     ``model_requested``, ``model_served``, ``request_id``,
                   ``input_tokens``, ``output_tokens``,
                   ``cache_read_tokens``, ``cache_write_tokens``,
                   ``latency_s``, ``stop_reason``, ``retries``, ``cost_usd``,
                   ``content`` (the response's blocks; a command agent's, from
                   the proxy, are its text and thinking blocks, its tool calls
                   being ``model_tool_use``), text kept up to
                   ``upstream.MAX_TEXT_CHARS`` per answer, ``text_truncated``
                   (the whole count) when cut, ``tools_offered`` (a command
                   agent's: the tool names its request offered),
                   ``started_at``, ``ended_at``
``model_retry``    ``status`` (HTTP status or ``connection``), ``attempt``,
                   ``wait_s``, ``request_id``: the built-in agent waiting to ask again
``model_upstream_error`` ``status`` (HTTP status or ``connection``), ``error_type``,
                   ``message``, ``request_id``, ``api``: an error answer of the
                   provider (``agents.upstream`` reads these)
``model_mismatch`` ``pinned``, ``served``: an answer naming another model than the
                   candidate's (and none of its ``model_aliases``)
``model_refused``  ``reason`` (the budget the proxy enforced, ``model_not_pinned``),
                   ``detail``
``model_count_tokens`` ``model_requested``, ``input_tokens``: a token count the
                   proxy relayed (recorded, never charged)
``proxy_refused``  ``method``, ``path``, ``status``, ``reason``: a request the
                   proxy did not relay (another path or method, an unknown
                   token, a trial not started)
``proxy_probe``    ``method``, ``path``: a reachability probe answered locally
``agent_command``  ``command``, ``exit_code``, ``timed_out``, ``duration_s``,
                   ``output``, ``stderr``: a command agent's run
``model_tool_use`` ``tool``, ``arguments``, ``tool_use_id``: what a model
                   *reported* it called (``source: model_reported``), from
                   the proxy; never confused with harness-observed ``tool``
``network_counters`` ``before``, ``after`` (the sandbox's kernel counts of packets
                   with no route out, when the agent started and once it
                   stopped), ``attempts`` (their difference; null when either
                   could not be read): what ``forbidden_effects`` rests on
``stop``           ``reason`` (a ``StopReason``), ``detail``
``log_closed``     ``count`` (events before this one)
=================  ===========================================================

``source`` is ``harness`` for what trialbox observed itself and
``model_reported`` for what a model's response claimed. A string that is not
valid Unicode (a lone surrogate in a model's JSON, a file name's raw byte) is
recorded escaped (``\udcff``, ``\xff``) and the event's ``escaped`` lists the
fields where that was done: nothing is dropped and nothing fails to record.
A value nested deeper than ``textsafe.MAX_DEPTH`` containers is recorded as a marker
from that depth on, its paths in ``depth_capped`` (the walk is iterative: no depth
the agent sends can exhaust the harness's recursion limit); a value JSON cannot hold
(keys that do not sort together) leaves the field names as ``unrecordable`` with the
``error``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .textsafe import recordable_data

SCHEMA_VERSION = 1
GENESIS = "0" * 64


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def _canonical(event: dict[str, Any]) -> bytes:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def event_hash(event: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical({k: v for k, v in event.items() if k != "hash"})).hexdigest()


class EventLog:
    """Appends hash-chained events to a JSONL file; thread-safe; flushed per event."""

    def __init__(self, path: Path, trial_id: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "x", encoding="utf-8")  # never overwrite a log
        self._lock = threading.Lock()
        self.seq = 0
        self.head = GENESIS
        self.closed = False
        self.append("log_opened", trial_id=trial_id, schema_version=SCHEMA_VERSION)

    def append(self, kind: str, source: str = "harness", **fields: Any) -> dict[str, Any]:
        """Write one event and return it (with its hash)."""
        escaped: list[str] = []
        capped: list[str] = []
        fields = recordable_data(fields, escaped=escaped, raw_bytes=False, capped=capped)  # as sent: never refused
        if escaped:
            fields["escaped"] = escaped
        if capped:
            fields["depth_capped"] = capped[:100]
        with self._lock:
            if self.closed:
                raise ValueError("event log is closed")
            event = {"seq": self.seq, "kind": kind, "source": source, **fields, "prev_hash": self.head}
            try:
                line = _canonical(event)
            except (ValueError, TypeError, RecursionError) as exc:  # a value no JSON can hold: named, not fatal
                event = {"seq": self.seq, "kind": kind, "source": source, "unrecordable": sorted(map(str, fields)),
                         "error": f"{type(exc).__name__}: {exc}"[:500], "prev_hash": self.head}
                line = _canonical(event)
            event["hash"] = hashlib.sha256(line).hexdigest()
            self._fh.write(_canonical(event).decode() + "\n")
            self._fh.flush()
            self.seq += 1
            self.head = event["hash"]
            return event

    def close(self) -> str:
        """Write ``log_closed``, fsync, close; returns the final hash (keep it as the anchor)."""
        if self.closed:
            return self.head
        try:
            self.append("log_closed", count=self.seq)
            with self._lock:
                self._fh.flush()
                os.fsync(self._fh.fileno())
        finally:  # closed even when the disk is full: a second close (the session's clean-up) does not write again
            with self._lock:
                if not self.closed:
                    self.closed = True
                    try:
                        self._fh.close()
                    except OSError:
                        pass  # the error that matters was raised above
        return self.head


@dataclass(frozen=True)
class VerifyResult:
    """What verification found: ``problems`` is empty when the log is intact."""

    count: int
    head: str
    closed: bool
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_events(path: Path, expected_head: str | None = None) -> VerifyResult:
    """Check every line's hash, the sequence and the chain; optionally the final hash."""
    problems: list[str] = []
    prev, count, closed = GENESIS, 0, False
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                event = json.loads(line)
            except ValueError:
                problems.append(f"line {lineno}: not JSON")
                continue
            if event.get("hash") != event_hash(event):
                problems.append(f"line {lineno}: content does not match its hash (edited)")
            if event.get("seq") != count:
                problems.append(f"line {lineno}: seq {event.get('seq')} where {count} was expected (line removed or inserted)")
            if event.get("prev_hash") != prev:
                problems.append(f"line {lineno}: prev_hash does not match the line before (chain broken)")
            if closed:
                problems.append(f"line {lineno}: event after log_closed")
            if event.get("kind") == "log_closed":
                closed = True
                if event.get("count") != count:
                    problems.append(f"line {lineno}: log_closed counts {event.get('count')} events, {count} precede it")
            prev = event.get("hash", "")
            count += 1
    if not closed:
        problems.append("no log_closed event: the log was truncated or never closed")
    if expected_head is not None and prev != expected_head:
        problems.append(f"final hash {prev} differs from the recorded anchor {expected_head}")
    return VerifyResult(count, prev, closed, problems)


def read_events(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
