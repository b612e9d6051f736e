"""Topology scoped to the question, on big labs: tokens, and what the nodes in question keep.

The labs are ``tests/integration/gns3_labs.py``'s plans (half QEMU routers with
6 ports, half VPCS PCs, a ring of routers plus chords, ~1.5 links per node) at
200 and 1,000 nodes, as REST-shaped dicts (the fields GNS3 returns; no server is
needed to count tokens: ``bench/topology.py`` measures the fetch on a real one).

For each lab and context_limit (8K, 32K, 128K; the topology may take 25% of the
message budget), the question "Why can PC17 not ping R42?" is asked and the
topology injected by the hook is checked against the one before this change (the
same hook with no conversation to focus on: uniform reduction). Per rendering:
its tokens, and for PC17, R42 and their neighbours whether each keeps its ports
(every port label), its console address (``host:port``, or ``name:port`` in a line
grouped by console host) and every link it has.

Run: ``.venv/bin/python bench/topology_scope.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

from gns3_labs import lab_plan

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context.injection import TOPOLOGY_SHARE, fit_topology
from gns3server.agent.gns3_copilot.agent.context.topology import render_topology

QUESTION = "Why can PC17 not ping R42?"
ASKED = ("PC17", "R42")


def rest_lab(n_nodes: int) -> dict[str, Any]:
    """A lab plan as GNS3's REST API would return it."""
    plan = lab_plan(n_nodes)
    nodes: dict[str, dict[str, Any]] = {}
    for i in range(1, plan.routers + 1):
        nodes[f"R{i}"] = {"kind": "qemu", "ports": 6}
    for i in range(1, plan.pcs + 1):
        nodes[f"PC{i}"] = {"kind": "vpcs", "ports": 1}
    rest_nodes = []
    for index, (name, spec) in enumerate(nodes.items()):
        rest_nodes.append({
            "node_id": f"id-{name}", "name": name, "node_type": spec["kind"], "status": "started",
            "console_type": "telnet", "console_host": "127.0.0.1", "console": 5000 + index,
            "x": index * 10, "y": -index * 5,
            "ports": [{"name": f"Ethernet{p}", "short_name": f"e{p}", "adapter_number": p, "port_number": 0,
                       "link_type": "ethernet"} for p in range(spec["ports"])],
        })
    links = [
        {"link_id": f"l{i}", "link_type": "ethernet", "suspend": False, "filters": {},
         "nodes": [{"node_id": f"id-{a}", "adapter_number": int(pa[1:]), "port_number": 0},
                   {"node_id": f"id-{b}", "adapter_number": int(pb[1:]), "port_number": 0}]}
        for i, (a, pa, b, pb) in enumerate(plan.links)
    ]
    return {"project_id": "p", "name": f"lab{n_nodes}", "status": "opened", "nodes": rest_nodes, "links": links}


def neighbours(lab: dict[str, Any], name: str) -> set[str]:
    names = {n["node_id"]: n["name"] for n in lab["nodes"]}
    found = set()
    for link in lab["links"]:
        ends = [names[e["node_id"]] for e in link["nodes"]]
        if name in ends:
            found |= set(ends)
    return found - {name}


def kept(lab: dict[str, Any], text: str, name: str) -> tuple[bool, bool, bool]:
    """(ports, console address, links) of node ``name`` present in ``text``."""
    node = next(n for n in lab["nodes"] if n["name"] == name)
    lines = text.splitlines()
    ports_line = next((lines[i + 1] for i, line in enumerate(lines[:-1])
                       if line.startswith(f"{name} ") and lines[i + 1].startswith("  ")), "")
    ports = all(p["short_name"] in ports_line for p in node["ports"])
    # "127.0.0.1:5041" on the node's own line, or "R42:5041" in a grouped line (host on the group)
    console = f"127.0.0.1:{node['console']}" in text or f" {name}:{node['console']}" in text
    full = render_topology(lab, 1)
    own = [line for line in full.splitlines() if " <-> " in line and (line.startswith(f"{name} ") or f"<-> {name} " in line)]
    links = all(line in lines for line in own)
    return ports, console, links


def main() -> None:
    counter = TokenCounter()
    print("| lab | limit | topology share | full (level 0) | before: tokens, level | asked nodes keep ports/console/links (before) "
          "| focused: tokens | asked nodes keep (focused) | their neighbours keep (focused) |")
    print("|" + "---|" * 9)
    for size in (200, 1000):
        lab = rest_lab(size)
        full = counter.text(render_topology(lab, 0))
        for limit in (8, 32, 128):
            share = int(limit * 1000 * 0.75 * TOPOLOGY_SHARE)
            before = fit_topology(lab, share, counter)
            after = fit_topology(lab, share, counter, QUESTION)

            def score(text: str, names: list[str], lab: dict[str, Any] = lab) -> str:
                results = [kept(lab, text, n) for n in names]
                return "/".join(f"{sum(r[i] for r in results)}" for i in range(3)) + f" of {len(names)}"

            around = sorted(set().union(*(neighbours(lab, n) for n in ASKED)))
            print(f"| {size} nodes | {limit}K | {share:,} | {full:,} | {before.tokens:,}, "
                  f"{'level ' + str(before.level) if before.level is not None else 'cut'} "
                  f"| {score(before.text, list(ASKED))} | {after.tokens:,} | {score(after.text, list(ASKED))} "
                  f"| {score(after.text, around)} |")


if __name__ == "__main__":
    main()
