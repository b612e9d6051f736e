"""Fixtures that run the installed gns3-server for integration tests.

``gns3_server`` (session) is a :class:`gns3_process.GNS3ServerProcess`:
``base_url``, ``username``/``password`` (admin), ``jwt_secret_key``,
``await gns3_server.token()`` and ``gns3_server.client(...)``. Later suites reuse
it as is; how the server is started lives in ``gns3_process.server_command``.
``gns3_client`` is a logged-in admin client, ``gns3_project`` a fresh project
deleted afterwards, ``small_lab`` that project with a 4-node lab in it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from gns3_labs import build_lab
from gns3_process import GNS3ServerProcess

from tests.support.gns3_admin import AdminClient

# The administrator of the shared test server lets users reach the loopback stubs (the default
# policy, public https only, is tested on a server of its own: test_security_secrets.py).
COPILOT_SETTINGS = {"heartbeat_seconds": 0.5, "user_llm_endpoints": "public, 127.0.0.1"}


@pytest.fixture(scope="session")
def gns3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GNS3ServerProcess]:
    # A short heartbeat so that copilot tests see one while a scripted LLM is held.
    root = tmp_path_factory.mktemp("gns3server")
    # prompts_dir: where test_webui31_api writes an administrator's prompt files (absent: packaged ones).
    copilot = {**COPILOT_SETTINGS, "prompts_dir": root / "config" / "copilot-prompts"}
    server = GNS3ServerProcess.start(root, copilot=copilot)
    try:
        yield server
    finally:
        server.stop()
        assert server.process.poll() is not None, "gns3-server outlived the test session"


@pytest.fixture
async def gns3_client(gns3_server: GNS3ServerProcess) -> AsyncIterator[AdminClient]:
    """A client logged in as admin (it logs in on first use)."""
    async with gns3_server.client() as client:
        yield client


@pytest.fixture
async def gns3_project(gns3_client: AdminClient, request: pytest.FixtureRequest) -> AsyncIterator[dict[str, Any]]:
    """A fresh, open project, deleted afterwards."""
    project = await gns3_client.create_project(f"test-{request.node.name}"[:80])
    try:
        yield project
    finally:
        await gns3_client.delete_project(project["project_id"])


@pytest.fixture
async def small_lab(gns3_client: AdminClient, gns3_project: dict[str, Any]) -> dict[str, Any]:
    """``gns3_project`` with 2 VPCS PCs and 2 QEMU routers, 4 links (see gns3_labs)."""
    await build_lab(gns3_client, gns3_project["project_id"], 4)
    return gns3_project
