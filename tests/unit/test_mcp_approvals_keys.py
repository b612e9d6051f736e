"""MCP approvals (bound to the exact call, single use, expiring) and the MCP key store (hashed keys)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from gns3server.agent.gns3_copilot.mcp.approvals import (
    ApprovalDecidedError,
    ApprovalNotFoundError,
    Approvals,
    call_digest,
)
from gns3server.agent.gns3_copilot.mcp.keys import DATABASE_NAME, MCPKeyNotFoundError, MCPKeyStore, digest_of

CALL = {"device": "R1", "commands": ["interface e0", "ip address 10.0.0.1 255.255.255.0"]}


def ask(approvals: Approvals, user: str = "u1", credential: str = "mcp-key:k1", arguments=CALL):
    return approvals.request(user_id=user, credential_id=credential, via="mcp:key:laptop",
                             tool="gns3_config_commands", project_id="p1", arguments=arguments)


def redeem(approvals: Approvals, approval_id: str, user: str = "u1", credential: str = "mcp-key:k1", arguments=CALL):
    return approvals.redeem(user_id=user, credential_id=credential, approval_id=approval_id,
                            tool="gns3_config_commands", project_id="p1", arguments=arguments)


def test_digest_ignores_key_order_and_nothing_else():
    assert call_digest("t", "p", {"a": 1, "b": [1, 2]}) == call_digest("t", "p", {"b": [1, 2], "a": 1})
    assert call_digest("t", "p", {"b": [1, 2]}) != call_digest("t", "p", {"b": [2, 1]})
    assert call_digest("t", "p", {"a": 1}) != call_digest("t", "q", {"a": 1})


def test_an_approval_runs_exactly_its_call_once():
    approvals = Approvals()
    approval = ask(approvals)
    assert redeem(approvals, approval.approval_id).state == "pending"  # still waiting, not used up
    with pytest.raises(ApprovalNotFoundError):
        approvals.decide("u2", approval.approval_id, True)  # another user's: looks absent
    approvals.decide("u1", approval.approval_id, True)
    with pytest.raises(ApprovalDecidedError):
        approvals.decide("u1", approval.approval_id, False)
    changed = {**CALL, "commands": [*CALL["commands"], "shutdown"]}
    for kwargs in ({"arguments": changed}, {"credential": "mcp-key:k2"}, {"user": "u2"}):
        with pytest.raises(ApprovalNotFoundError):
            redeem(approvals, approval.approval_id, **kwargs)
    assert redeem(approvals, approval.approval_id).state == "approved"
    with pytest.raises(ApprovalNotFoundError):
        redeem(approvals, approval.approval_id)  # single use


def test_approvals_expire():
    approvals = Approvals(lifetime=0.0)
    approval = ask(approvals)
    with pytest.raises(ApprovalNotFoundError):
        approvals.decide("u1", approval.approval_id, True)
    assert approvals.of_user("u1") == []


async def test_keys_are_stored_hashed_and_refused_once_revoked(tmp_path):
    store = await MCPKeyStore.open(tmp_path)
    try:
        record, secret = await store.create("u1", "laptop", "read_only", expires_at=None)
        assert record.read_only and (await store.verify(secret)).key_id == record.key_id
        assert await store.verify(secret + "x") is None
        with pytest.raises(MCPKeyNotFoundError):
            await store.revoke("u2", record.key_id)
        await store.revoke("u1", record.key_id)
        assert await store.verify(secret) is None and not await store.still_usable(record.key_id)
        _, expired = await store.create("u1", "old", "full", expires_at=time.time() - 1)
        assert await store.verify(expired) is None
        with pytest.raises(ValueError, match="scope"):
            await store.create("u1", "x", "admin")  # type: ignore[arg-type]
    finally:
        await store.close()
    raw = b"".join(f.read_bytes() for f in tmp_path.glob(DATABASE_NAME + "*"))  # the WAL too, if left
    assert secret.encode() not in raw and digest_of(secret).encode() in raw
    rows = sqlite3.connect(tmp_path / DATABASE_NAME).execute("SELECT name, scope FROM copilot_mcp_keys").fetchall()
    assert sorted(rows) == [("laptop", "read_only"), ("old", "full")]
