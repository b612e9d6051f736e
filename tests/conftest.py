"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.console import AuditLog, load_policy


@pytest.fixture(scope="module")
def policy():
    """The packaged default device command policy."""
    return load_policy()


@pytest.fixture
async def audit(tmp_path):
    """A console audit log in a temporary data directory."""
    log = AuditLog(tmp_path)
    yield log
    await log.close()
