"""Build test labs of any size on a real gns3-server, for tests and benchmarks.

A lab of ``n`` nodes is half routers, half PCs. PCs are VPCS nodes (one port).
Routers are QEMU nodes with six adapters: GNS3 creates them without starting
anything, but it does require a ``qemu-system-x86_64`` binary on the PATH (Debian
package ``qemu-system-x86``, installed by ``scripts/test``). Ethernet switches
would be the natural multi-port node, but they need Dynamips, which Debian does
not ship.

Links: every PC to its router's e0, the routers in a ring (e1 -> next e2), and two
sets of chords (e3, e4) - about 1.5 links per node, exactly 300 for 200 nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gns3server.agent.gns3_copilot.gns3_client.client import GNS3Client, gather_cancelling

ROUTER_TEMPLATE_NAME = "Copilot test router"
ROUTER_ADAPTERS = 6

T = TypeVar("T")
LinkSpec = tuple[str, str, str, str]  # node A, port A, node B, port B


@dataclass(frozen=True)
class LabPlan:
    routers: int
    pcs: int
    links: tuple[LinkSpec, ...]

    @property
    def nodes(self) -> int:
        return self.routers + self.pcs


def lab_plan(n_nodes: int) -> LabPlan:
    """Which nodes and links a lab of ``n_nodes`` has (router names R1.., PC names PC1..)."""
    routers = (n_nodes + 1) // 2
    pcs = n_nodes - routers
    links: list[LinkSpec] = [(f"PC{i}", "e0", f"R{i}", "e0") for i in range(1, pcs + 1)]
    if routers == 2:
        links.append(("R1", "e1", "R2", "e2"))
    elif routers >= 3:
        links += [(f"R{i}", "e1", f"R{i % routers + 1}", "e2") for i in range(1, routers + 1)]
    half, quarter = routers // 2, routers // 4
    links += [(f"R{i}", "e3", f"R{i + half}", "e3") for i in range(1, half + 1)]
    for base in (0, 2 * quarter):
        links += [(f"R{base + i}", "e4", f"R{base + i + quarter}", "e4") for i in range(1, quarter + 1)]
    return LabPlan(routers=routers, pcs=pcs, links=tuple(links))


async def _bounded(limit: int, factories: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run coroutine factories concurrently, at most ``limit`` at a time."""
    semaphore = asyncio.Semaphore(limit)

    async def run(factory: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await factory()

    return await gather_cancelling(*(run(f) for f in factories))


async def router_template_id(client: GNS3Client) -> str:
    """The QEMU router template of the test labs, created on first use."""
    for template in await client.templates():
        if template.get("name") == ROUTER_TEMPLATE_NAME:
            return str(template["template_id"])
    template = await client.request("POST", "/templates", json={
        "name": ROUTER_TEMPLATE_NAME,
        "template_type": "qemu",
        "compute_id": "local",
        "platform": "x86_64",
        "adapters": ROUTER_ADAPTERS,
        "ram": 128,
        "console_type": "telnet",
        "default_name_format": "R{0}",
    })
    return str(template["template_id"])


async def vpcs_template_id(client: GNS3Client) -> str:
    """GNS3's built-in VPCS template (names its nodes PC1, PC2, ...)."""
    for template in await client.templates():
        if template.get("template_type") == "vpcs" and template.get("builtin"):
            return str(template["template_id"])
    raise LookupError("gns3-server has no built-in VPCS template")


async def build_lab(
    client: GNS3Client, project_id: str, n_nodes: int, *, concurrency: int = 16
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Create the nodes and links of :func:`lab_plan` in a project; return them as GNS3 did."""
    plan = lab_plan(n_nodes)
    router_tid, pc_tid = await gather_cancelling(router_template_id(client), vpcs_template_id(client))

    def node_factory(template_id: str, index: int) -> Callable[[], Awaitable[dict[str, Any]]]:
        x, y = (index % 20) * 120, (index // 20) * 120
        return lambda: client.create_node_from_template(project_id, template_id, x=x, y=y)

    factories = [node_factory(router_tid, i) for i in range(plan.routers)]
    factories += [node_factory(pc_tid, plan.routers + i) for i in range(plan.pcs)]
    await _bounded(concurrency, factories)
    nodes = await client.nodes(project_id)

    def link_factory(spec: LinkSpec) -> Callable[[], Awaitable[dict[str, Any]]]:
        return lambda: client.create_link(project_id, *spec, nodes=nodes)

    links = await _bounded(concurrency, [link_factory(spec) for spec in plan.links])
    return nodes, links
