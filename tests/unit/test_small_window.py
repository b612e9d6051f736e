"""Small windows get compact tool definitions and prompt, then an essential subset."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.agent.context.calibration import answer_tokens
from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context_manager import resolve_budget
from gns3server.agent.gns3_copilot.agent.model.prompts import compact_system_prompt_for, system_prompt_for
from gns3server.agent.gns3_copilot.agent.policies.modes import tools_for_mode
from gns3server.agent.gns3_copilot.agent.policies.small_window import (
    ESSENTIAL_TOOLS,
    FIXED_SHARE,
    ON_DEMAND_TOOLS,
    compact_tool,
    fit_to_window,
)
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


# 4K windows got the full offer until gns3_update_link (about 400 tokens) was added.
@pytest.mark.parametrize(("limit", "level"), [(2, "essential"), (3, "compact"), (4, "compact"), (5, "full"), (8, "full"),
                                            (128, "full")])
def test_each_window_gets_the_richest_offer_that_fits(tools, limit, level):
    chosen = fit(tools, limit)
    assert chosen.level == level
    assert chosen.fixed_tokens <= chosen.budget * FIXED_SHARE
    assert chosen.fixed_tokens == COUNTER.tools(chosen.tools) + COUNTER.text(chosen.system_prompt)


LLM_CONFIG_DOC = Path(__file__).resolve().parents[2] / "docs" / "llm-config.md"
NUMBER_WORDS = {"three": 3, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
TABLE_ROW = re.compile(
    r"^\| (\d+) \| ([\d,]+) \| ([\d,]+) \| (full|compact|essential) \((\d+) tools[^|]*\| ~([\d,]+) \| ~([\d,]+)", re.MULTILINE
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_documented_window_table_is_what_the_code_offers(tools):
    """docs/llm-config.md's "what each window gets" (it once said 4K got the full offer, and seven tools)."""
    doc = LLM_CONFIG_DOC.read_text(encoding="utf-8")
    heading = re.search(r"What each window gets with the (\w+) tools of lab-automation mode", doc)
    assert heading is not None and NUMBER_WORDS[heading.group(1)] == len(tools_for_mode(tools, "lab_automation"))
    rows = TABLE_ROW.findall(doc)
    assert [int(r[0]) for r in rows] == [2, 3, 4, 5, 8, 32]
    for limit, reply, budget, level, count, fixed, left in rows:
        config = {"context_limit": int(limit)}
        chosen = fit(tools, int(limit))
        assert (chosen.level, len(chosen.tools)) == (level, int(count)), limit
        assert (_number(reply), _number(budget)) == (answer_tokens(config), resolve_budget(config)["budget"]), limit
        assert _number(fixed) == pytest.approx(chosen.fixed_tokens, rel=0.05), limit
        assert _number(left) == pytest.approx(resolve_budget(config)["budget"] - chosen.fixed_tokens, rel=0.05), limit
    teaching = re.search(r"Teaching mode's (\w+) read-only tools go in full from 2K \(~([\d,]+) tokens", doc)
    assert teaching is not None
    chosen = fit(tools_for_mode(tools, "teaching"), 2, "teaching")
    assert (chosen.level, len(chosen.tools)) == ("full", NUMBER_WORDS[teaching.group(1)])
    assert _number(teaching.group(2)) == pytest.approx(chosen.fixed_tokens, rel=0.05)


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


def test_a_full_offer_that_does_not_fit_whole_leaves_out_the_on_demand_tools_first(tools):
    """At 5K the nine full definitions are over the ceiling; the eight without gns3_verify fit."""
    whole = fit(tools, 8)
    assert whole.level == "full" and "gns3_verify" in [t["function"]["name"] for t in whole.tools]
    chosen = fit(tools, 5)
    assert chosen.level == "full"
    assert [t["function"]["name"] for t in chosen.tools] == [t.name for t in tools if t.name not in ON_DEMAND_TOOLS]
    assert COUNTER.tools(list(tools)) + COUNTER.text(chosen.system_prompt) > chosen.budget * FIXED_SHARE
