"""Benchmark of the topology fetch and its renderings on a real gns3-server.

Starts the installed gns3-server exactly as the integration tests do
(``tests/integration/gns3_process.py``), builds labs of 10 / 50 / 200 nodes
(half QEMU routers, half VPCS PCs, ~1.5 links per node, see
``tests/integration/gns3_labs.py``) and reports, per lab:

- fetch: median wall time of ``fetch_topology`` (project, nodes and links
  fetched concurrently) over several runs;
- tokens per node (cl100k_base, the context manager's ``count_tokens``) of each
  rendering level, next to two baselines from the same data: the raw JSON of
  nodes+links as GNS3 returns them, and ``str()`` of a dict of node inventories
  (name -> server, console, type, template, id, ports, position; links as
  tuples), the design document's tool's shape.

Target: level 0 at most 25% of the raw-JSON tokens, while keeping
names, types, status, consoles and every link.

Run: ``.venv/bin/python bench/topology.py`` (``--sizes 10`` for a smoke run).
Needs ``qemu-system-x86_64`` on the PATH (the QEMU routers), as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

from gns3_labs import build_lab
from gns3_process import GNS3ServerProcess

from gns3server.agent.gns3_copilot.agent.context.topology import TOPOLOGY_LEVELS, render_topology
from gns3server.agent.gns3_copilot.agent.context_manager import count_tokens
from gns3server.agent.gns3_copilot.gns3_client import fetch_topology
from tests.support.gns3_admin import AdminClient


def inventory_baseline(rest: dict[str, Any], base_url: str) -> str:
    """``str()`` of the design document's tool result shape: a dict of node inventories plus link tuples."""
    server = urlparse(base_url).hostname
    by_id = {n["node_id"]: n for n in rest["nodes"]}

    def port_name(end: dict[str, Any]) -> str:
        node = by_id[end["node_id"]]
        return next(p["name"] for p in node["ports"]
                    if (p["adapter_number"], p["port_number"]) == (end["adapter_number"], end["port_number"]))

    inventory = {
        n["name"]: {
            "server": server, "name": n["name"], "console_port": n["console"],
            "console_type": n["console_type"], "type": n["node_type"], "template": n.get("template_id"),
            "node_id": n["node_id"], "ports": [{"name": p["name"], "short_name": p["short_name"]} for p in n["ports"]],
            "x": n["x"], "y": n["y"],
        }
        for n in rest["nodes"]
    }
    links = [
        (by_id[a["node_id"]]["name"], port_name(a), by_id[b["node_id"]]["name"], port_name(b))
        for a, b in (link["nodes"] for link in rest["links"])
    ]
    return str({"project_id": rest["project_id"], "name": rest["name"], "status": rest["status"],
                "nodes": inventory, "links": links})


async def measure(client: AdminClient, size: int, runs: int) -> dict[str, Any]:
    project = await client.create_project(f"bench-topology-{size}")
    pid = project["project_id"]
    try:
        started = time.perf_counter()
        await build_lab(client, pid, size)
        build_s = time.perf_counter() - started
        await fetch_topology(client, pid)  # warm the connection and the server's caches
        timings = []
        for _ in range(runs):
            started = time.perf_counter()
            topology = await fetch_topology(client, pid)
            timings.append((time.perf_counter() - started) * 1000)
        rest = topology.as_rest()
        tokens = {
            "raw JSON": count_tokens(json.dumps(rest["nodes"] + rest["links"])),
            "str(inventory)": count_tokens(inventory_baseline(rest, client.base_url)),
            **{f"level {lvl}": count_tokens(render_topology(rest, lvl)) for lvl in range(TOPOLOGY_LEVELS)},
        }
        return {"nodes": len(topology.nodes), "links": len(topology.links), "build_s": build_s,
                "fetch_ms": statistics.median(timings), "tokens": tokens}
    finally:
        await client.delete_project(pid)


def table(rows: list[dict[str, Any]]) -> str:
    columns = list(rows[0]["tokens"])
    head = ["nodes", "links", "fetch ms", *(f"{c} tok/node" for c in columns), "level 0 / raw JSON"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for row in rows:
        per_node = [row["tokens"][c] / row["nodes"] for c in columns]
        ratio = row["tokens"]["level 0"] / row["tokens"]["raw JSON"]
        cells = [str(row["nodes"]), str(row["links"]), f"{row['fetch_ms']:.1f}",
                 *(f"{v:.1f}" for v in per_node), f"{ratio:.1%}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def run(server: GNS3ServerProcess, sizes: list[int], runs: int) -> list[dict[str, Any]]:
    rows = []
    async with server.client() as client:
        for size in sizes:
            row = await measure(client, size, runs)
            print(f"  {size} nodes: built in {row['build_s']:.1f} s, fetch {row['fetch_ms']:.1f} ms, "
                  f"tokens {row['tokens']}", file=sys.stderr)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--runs", type=int, default=7, help="fetches per lab (median reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-topology-") as root, GNS3ServerProcess.start(Path(root)) as server:
        print(f"gns3-server {server.version} at {server.base_url}", file=sys.stderr)
        rows = asyncio.run(run(server, args.sizes, args.runs))
    print(table(rows))


if __name__ == "__main__":
    main()
