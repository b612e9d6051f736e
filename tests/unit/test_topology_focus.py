"""Topology scoped to the question: big labs keep full detail for the nodes in question."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context.injection import fit_topology
from gns3server.agent.gns3_copilot.agent.context.topology import focus_nodes, render_focused, render_topology
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from topology_scope import kept, neighbours, rest_lab

LAB = rest_lab(200)


def test_focus_is_the_named_nodes_and_their_neighbours():
    assert focus_nodes(LAB, "why can pc17 not ping R42?") == {"PC17", "R42"} | neighbours(LAB, "PC17") | neighbours(LAB, "R42")
    assert "R1" not in focus_nodes(LAB, "look at R10")  # whole names only
    assert focus_nodes(LAB, "hello there") == set()


@pytest.mark.parametrize("level", [0, 1])
def test_focused_rendering_keeps_ports_consoles_and_links_of_the_focus(level):
    focus = focus_nodes(LAB, "R42")
    text = render_focused(LAB, focus, level)
    for name in focus:
        assert kept(LAB, text, name) == (True, True, True), name
    assert f"other nodes ({len(LAB['nodes']) - len(focus)}):" in text
    assert "links between other nodes, by zone: " in text and "R<->R " in text
    if level == 1:
        assert "qemu started: " in text and "vpcs started: " in text
    assert TokenCounter().text(text) < TokenCounter().text(render_topology(LAB, 0)) / 4


def test_render_focused_refuses_a_bad_level():
    with pytest.raises(ValueError, match="focus level"):
        render_focused(LAB, set(), 2)


def test_big_lab_gets_the_focused_rendering_only_when_the_question_names_nodes():
    counter = TokenCounter()
    uniform = fit_topology(LAB, 1500, counter)
    focused = fit_topology(LAB, 1500, counter, "Why can PC17 not ping R42?")
    assert uniform.focus == () and uniform.level == 3
    assert set(focused.focus) >= {"PC17", "R42"} and focused.reduced and focused.tokens <= 1500
    assert kept(LAB, focused.text, "R42") == (True, True, True)
    assert kept(LAB, uniform.text, "R42")[0] is False
    assert "full detail for the nodes in focus" in focused.text
    # a lab that fits is rendered in full whatever the question
    assert fit_topology(LAB, 20_000, counter, "R42").level == 0


def test_hook_focuses_on_what_the_conversation_says_not_on_tool_outputs():
    config = {"context_limit": 8}
    hook = create_pre_model_hook("Lab:\n{{topology_info}}", lambda s: LAB, lambda: config, list)
    listing = ToolMessage(" ".join(n["name"] for n in LAB["nodes"]), tool_call_id="c1", name="gns3_topology")
    messages = [
        HumanMessage("What is in my lab?"),
        AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {}, "id": "c1"}]),
        listing,
        AIMessage("200 nodes."),
        HumanMessage("Now, why can PC17 not ping?"),
    ]
    report = hook({"messages": messages})["context_report"]
    assert set(report["topology_focus"]) == {"PC17"} | neighbours(LAB, "PC17")
    # a node named in a tool call's arguments is in focus too
    messages += [AIMessage("", tool_calls=[{"name": "show", "args": {"node_name": "R99"}, "id": "c2"}]),
                 ToolMessage("ok", tool_call_id="c2", name="show")]
    assert "R99" in hook({"messages": messages})["context_report"]["topology_focus"]


def test_the_conversation_is_read_for_node_names_only_for_a_lab_too_big_to_show_whole(monkeypatch):
    from gns3server.agent.gns3_copilot.agent import context_manager

    read = []
    real = context_manager._mentions
    monkeypatch.setattr(context_manager, "_mentions", lambda *args: read.append(1) or real(*args))
    small = rest_lab(3)
    messages = [HumanMessage("why can PC1 not ping?")]
    for lab, limit, expected in ((small, 128, []), (LAB, 8, [1])):
        read.clear()
        hook = create_pre_model_hook("Lab:\n{{topology_info}}", lambda s, lab=lab: lab, lambda limit=limit: {"context_limit": limit}, list)
        report = hook({"messages": messages})["context_report"]
        assert read == expected and report["topology_available"]
    assert "PC1" in report["topology_focus"]


@pytest.mark.parametrize(("text", "expected"), [
    ("the R1-R2 link flaps", {"R1", "R2"}),
    ("R1/e0 is down", {"R1"}),
    ("what is on R1:e0?", {"R1"}),
    ("check R10", {"R10"}),  # not R1
    ("R1-core is down", {"R1-core"}),  # a name with a dash is itself, not R1
    ("ping srv.lab.", {"srv.lab"}),
    ("r1 and r2", {"R1", "R2"}),
])
def test_node_names_are_found_as_engineers_write_them(text: str, expected: set[str]) -> None:
    names = ["R1", "R2", "R10", "R1-core", "srv.lab"]
    topology = {"nodes": [{"node_id": f"n{i}", "name": n} for i, n in enumerate(names)], "links": []}
    assert focus_nodes(topology, text) == expected
