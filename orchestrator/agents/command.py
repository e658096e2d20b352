"""The ``command`` agent: a command-line agent installed in the task image, run inside the sandbox.

Before the sandbox is created, ``prepare()`` starts the trial's recording
model proxy on a Unix socket in a host folder, which the sandbox mounts
read-only at ``/run/trialbox``. The command then runs inside the container
(as the sandbox user, in /workspace, with the remaining deadline as its
timeout) with:

* ``ANTHROPIC_BASE_URL=http://127.0.0.1:8088`` — an in-container forwarder to the socket;
* ``ANTHROPIC_API_KEY`` — a per-trial token the proxy accepts, never the real key;
* ``TRIALBOX_MODEL_SOCKET=/run/trialbox/model.sock``, ``TRIALBOX_MODEL`` (the snapshot);
* ``TRIALBOX_INSTRUCTION_FILE`` — the task's instruction.

Exit code 0 means the agent submitted; the last line of its output is the
summary, and a last line starting with ``ABSTAIN:`` means it abstained. A
budget the proxy enforced, the deadline, a broken sandbox or a non-zero exit
become the stop reason. Its own tool calls are not seen by trialbox: the
proxy records the tool_use blocks the model reported, marked as such.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .base import Agent, AgentContext
from ..errors import AgentStop
from .budget import StopReason
from .prices import PriceTable
from .proxy import SOCKET_NAME, ModelProxy
from .toolbox import Submission, clip

MOUNT = "/run/trialbox"
FORWARD_PORT = 8088
INSTRUCTION = "/tmp/trialbox-instruction.md"


class CommandAgent(Agent):
    name = "command"

    def __init__(self, command: str, model: str | None, api_key: str, upstream: str, prices: PriceTable,
                 env: dict[str, str] | None = None, summary: str = "last_line", api: str = "anthropic",
                 aliases: tuple[str, ...] = ()) -> None:
        self.command = command
        self.api = api
        self.env = dict(env or {})
        self.summary = summary
        self.model = model
        self.aliases = tuple(aliases)
        self.api_key = api_key
        self.upstream = upstream
        self.prices = prices
        self.proxy: ModelProxy | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

    def prepare(self, folder: Path | None = None) -> list[tuple[str, str]]:
        """Start the proxy; returns the read-only bind mounts (host, container) the sandbox needs."""
        if folder is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="trialbox-proxy-")
            folder = Path(self._tmp.name)
        self.proxy = ModelProxy(folder, self.upstream, self.api_key, self.model, self.prices, self.api,
                                self.aliases).start()
        return [(str(self.proxy.folder), MOUNT)]

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def run(self, ctx: AgentContext) -> None:
        if self.proxy is None:
            raise RuntimeError("CommandAgent.prepare() must run before the sandbox is created")
        self.proxy.attach(ctx.events, ctx.budget, ctx.canaries, ctx.trial_id)
        sandbox = ctx.toolbox.sandbox
        sandbox.write_file(INSTRUCTION, ctx.instruction.encode())
        sandbox.exec(["sh", "-c", f"nohup python3 {MOUNT}/forwarder.py {FORWARD_PORT} {MOUNT}/{SOCKET_NAME} "
                                  f">/tmp/trialbox-forwarder.log 2>&1 &"], timeout=10)
        url = f"http://127.0.0.1:{FORWARD_PORT}"
        api = ({"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": self.proxy.token} if self.api == "openai" else
               {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": self.proxy.token})
        env = {**self.env, **api,
               "TRIALBOX_MODEL_SOCKET": f"{MOUNT}/{SOCKET_NAME}", "TRIALBOX_MODEL": self.model or "",
               "TRIALBOX_INSTRUCTION_FILE": INSTRUCTION}
        ctx.budget.check_deadline()
        remaining = ctx.budget.remaining()
        res = sandbox.exec(["bash", "-c", self.command], timeout=remaining, env=env)
        self.proxy.wait_idle()  # every model call the command made is recorded before the result is built
        out = res.stdout.decode("utf-8", errors="replace")
        ctx.events.append("agent_command", command=self.command, exit_code=res.exit_code, timed_out=res.timed_out,
                          duration_s=round(res.duration_s, 6), output=clip(out, 8000), output_size=res.stdout_size,
                          stderr=clip(res.stderr.decode("utf-8", errors="replace"), 4000))
        if self.proxy.stop_reason is not None:
            raise self.proxy.stop_reason
        fault = self.proxy.fault()  # the provider failed the agent (before a timeout: it may have waited on it)
        if fault is not None:
            raise AgentStop(StopReason.MODEL_ERROR, fault)
        if res.timed_out:
            raise AgentStop(StopReason.DEADLINE, "the command was still running at the deadline")
        if res.exit_code != 0:
            raise AgentStop(StopReason.AGENT_ERROR, f"the command exited with {res.exit_code}")
        last = self._summary(out, sandbox)
        abstain = last.startswith("ABSTAIN:")
        ctx.toolbox.submission = Submission(last.removeprefix("ABSTAIN:").strip(), abstain)

    def _summary(self, out: str, sandbox) -> str:
        """The submit summary, from where the candidate says it is (``last_line``, ``none``, ``file:<path>``,
        ``json:<path>:<key>``); what is not there is an empty summary, never an error of the agent's."""
        mode, _, where = self.summary.partition(":")
        if mode == "none":
            return ""
        if mode in ("file", "json"):
            path, _, key = where.rpartition(":") if mode == "json" else (where, "", "")
            try:
                text = sandbox.read_file(path, max_bytes=1 << 20).decode("utf-8", errors="replace")
                if mode == "json":
                    text = str(json.loads(text).get(key) or "")
            except Exception:  # noqa: BLE001 - what the agent left is data: never trialbox's failure, never a retry
                return ""
            return clip(text.strip(), 2000)
        return next((line for line in reversed(out.strip().splitlines()) if line.strip()), "")
