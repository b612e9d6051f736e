"""An ``FRRLab`` as a GNS3 project: one node per router, one link per veth, each router's vtysh on its node's console.

GNS3 3.0 cannot start nodes on this OS (uBridge is not packaged), so the nodes stay
"stopped" in GNS3 and the routers run outside it, in the lab's namespaces; what
GNS3 holds is the topology (QEMU router nodes ``R1``.., linked port for port as
the veths are: ``eth1`` is ``e1``) and each node's console port, on which
:func:`cli_servers.serve_vtysh` answers with that router's vtysh. The copilot
finds the device exactly as it finds any node's console: from GNS3's node.

QEMU nodes get the ``ios`` console driver from their node type; the tests name
FRR's (:data:`CONSOLE_DRIVER`) in their tool calls, as a model is told to for a
QEMU node running FRR. GNS3's data does not confirm that choice, so the policy
judges every line in every CLI's grammar there (``registry.Drivers.pick``'s ``cli_known``).

Fixtures for a test module (import them; one lab and one project per module):
``frr_lab`` (the ``FRRLab``), ``frr_gns3`` (the ``FRRProject`` on the session's
gns3-server) and ``frr_restored`` (autouse once imported: after each test, a router
the test left changed is restarted from its baseline, and the network has
converged again).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from cli_servers import serve_vtysh
from frr_lab import FRRLab
from gns3_labs import router_template_id
from shell_process import ShellServer

from gns3server.agent.gns3_copilot.gns3_client.client import GNS3Client

CONSOLE_DRIVER = "frr"


def gns3_port(interface: str) -> str:
    """The GNS3 port name of a router interface (``eth1`` -> ``e1``)."""
    return "e" + interface.removeprefix("eth")


@dataclass
class FRRProject:
    """The project (``project_id``), its nodes by name as GNS3 made them, and each router's console server."""

    project_id: str
    lab: FRRLab
    nodes: dict[str, dict[str, Any]]
    consoles: dict[str, ShellServer]


@asynccontextmanager
async def frr_project(client: GNS3Client, lab: FRRLab, name: str | None = None) -> AsyncIterator[FRRProject]:
    """A new project mirroring ``lab`` (``client`` may create projects); deleted, consoles stopped, on exit."""
    created = await client.request("POST", "/projects", json={"name": name or f"frr-{uuid.uuid4().hex[:8]}"})
    project_id = str(created["project_id"])
    consoles: dict[str, ShellServer] = {}
    try:
        template = await router_template_id(client)
        nodes = {}
        for index, router in enumerate(lab.routers):
            nodes[router] = await client.create_node_from_template(project_id, template, x=index * 150, y=0,
                                                                   name=router)
        listed = await client.nodes(project_id)
        for link in lab.links:
            await client.create_link(project_id, link.a, gns3_port(link.a_if), link.b, gns3_port(link.b_if),
                                     nodes=listed)
        for router, node in nodes.items():
            consoles[router] = await asyncio.to_thread(serve_vtysh, lab, router, int(node["console"]))
        yield FRRProject(project_id, lab, nodes, consoles)
    finally:
        for server in consoles.values():
            await asyncio.to_thread(server.stop)
        await client.request("DELETE", f"/projects/{project_id}")


@pytest.fixture(scope="module")
def frr_lab() -> Iterator[FRRLab]:
    lab = FRRLab.start()
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
async def frr_gns3(gns3_server: Any, frr_lab: FRRLab) -> AsyncIterator[FRRProject]:
    async with gns3_server.client() as client, frr_project(client, frr_lab) as made:
        yield made


@pytest.fixture(autouse=True)
async def frr_restored(frr_lab: FRRLab) -> AsyncIterator[None]:
    yield
    await asyncio.to_thread(frr_lab.restore)
