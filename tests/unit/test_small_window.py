"""Small windows get compact tool definitions and prompt, then an essential subset (issue 15)."""

from __future__ import annotations

import tempfile

import pytest

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.prompts import compact_system_prompt_for, system_prompt_for
from gns3server.agent.gns3_copilot.agent.small_window import ESSENTIAL_TOOLS, FIXED_SHARE, compact_tool, fit_to_window
from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices, RunContext, build_tools

COUNTER = TokenCounter("cl100k_base")


async def _refuse(privilege: str, path: str) -> str:
    return "denied"  # never asked: these tests only measure the tools' definitions


@pytest.fixture(scope="module")
def tools():
    console = ConsoleServices(load_policy(), DeviceLocks(), AuditLog(tempfile.mkdtemp()), lambda user_id: _refuse)
    return build_tools(RunContext(lambda: None, "p", "u", "s"), console)


def fit(tools, limit: int, mode: str = "lab_automation"):
    return fit_to_window(tools, system_prompt_for(mode), compact_system_prompt_for(mode), {"context_limit": limit}, COUNTER)


# 4K windows got the full offer until gns3_update_link (about 400 tokens) was added (issue 13).
@pytest.mark.parametrize(("limit", "level"), [(2, "essential"), (3, "compact"), (4, "compact"), (8, "full"), (128, "full")])
def test_each_window_gets_the_richest_offer_that_fits(tools, limit, level):
    chosen = fit(tools, limit)
    assert chosen.level == level
    assert chosen.fixed_tokens <= chosen.budget * FIXED_SHARE
    assert chosen.fixed_tokens == COUNTER.tools(chosen.tools) + COUNTER.text(chosen.system_prompt)


def test_the_essential_offer_keeps_the_essential_tools_compact(tools):
    chosen = fit(tools, 2)
    assert [t["function"]["name"] for t in chosen.tools] == [t.name for t in tools if t.name in ESSENTIAL_TOOLS]
    assert "{{topology_info}}" in chosen.system_prompt and COUNTER.text(chosen.system_prompt) < 100


def test_a_compact_tool_keeps_names_types_enums_and_required(tools):
    full = {t.name: t for t in tools}["gns3_node_action"]
    spec = compact_tool(full)["function"]
    assert spec["name"] == "gns3_node_action" and spec["description"].endswith(".")
    params = spec["parameters"]
    assert params["required"] == ["action", "nodes"]
    assert params["properties"]["action"]["enum"] == ["start", "stop", "suspend", "reload"]
    assert "description" not in params["properties"]["nodes"]
    assert COUNTER.tools([compact_tool(full)]) < COUNTER.tools([full])


def test_optional_parameters_lose_their_null_alternative(tools):
    spec = compact_tool({t.name: t for t in tools}["gns3_list_templates"])["function"]
    assert spec["parameters"]["properties"]["category"] == {"type": "string"}
