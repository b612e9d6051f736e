"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.service.storage import Storage, open_sqlite_storage


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    """The copilot's SQLite storage in a temporary data directory, closed afterwards."""
    store = await open_sqlite_storage(tmp_path / "data")
    yield store
    await store.close()
