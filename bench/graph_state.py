"""What the graph's state costs a turn, at 10 and at 500 turns: the message reducer and the store.

A LangGraph graph shaped like the copilot's (a model node, a tools node, the conditional
edge between them; every fifth turn a tool call, so two model steps), its nodes scripted
(no model, no hook: what is left is LangGraph's step, the reducer and the checkpoint), on
the copilot's SQLite storage (``service/storage.py``: a row per message, the list kept in
memory) with ``durability="exit"`` as the service runs it. One conversation is driven to
``--turns`` turns; CPU time (``time.process_time``, the checkpointer's thread included)
is measured over turns 1-20 and over the last 20. Run with the copilot's reducer
(``agent/state_messages.py``) and, in the same process, with LangGraph's ``add_messages``
(what the graph used before); the turns alternate between the two, so both see the same load.

Run: ``.venv/bin/python bench/graph_state.py`` (about a minute; ``--turns 100`` quicker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from gns3server.agent.gns3_copilot.agent.state_messages import append_messages
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage

TEXT = "R1 and R2 share the 10.0.12.0/30 link; OSPF is FULL on both ends and the routes are in. " * 3


def graph(reducer: Callable[..., Any], checkpointer: Any) -> Any:
    State = TypedDict("State", {"messages": Annotated[list, reducer]})  # type: ignore[misc]

    def model(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage) and "[tool]" in str(last.content):
            call = {"name": "gns3_topology", "args": {"project_id": "p"}, "id": f"call-{len(state['messages'])}"}
            return {"messages": [AIMessage("", tool_calls=[call])]}
        return {"messages": [AIMessage(TEXT)]}

    def tools(state: Any) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[attr-defined]
        return {"messages": [ToolMessage(TEXT * 4, tool_call_id=call["id"], name=call["name"])]}

    def route(state: Any) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


async def run(turns: int, window: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-graph-state-") as tmp:
        storages, apps = {}, {}
        for name, reducer in (("ours", append_messages), ("add_messages", add_messages)):
            storages[name] = await open_sqlite_storage(Path(tmp) / name)
            apps[name] = graph(reducer, storages[name].checkpointer)
            results[name] = {"early": [], "late": []}
        try:
            for n in range(1, turns + 1):
                for name, app in apps.items():
                    question = HumanMessage(f"Question {n}: why can PC1 not ping PC3? {'[tool]' if n % 5 == 0 else ''}")
                    start = time.process_time()
                    await app.ainvoke({"messages": [question]}, {"configurable": {"thread_id": "t"}}, durability="exit")
                    await storages[name].prune("t")
                    spent = time.process_time() - start
                    if n <= window:
                        results[name]["early"].append(spent)
                    elif n > turns - window:
                        results[name]["late"].append(spent)
        finally:
            for storage in storages.values():
                await storage.close()
    return {name: {k: statistics.mean(v) * 1000 for k, v in phases.items()} for name, phases in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    args = parser.parse_args()
    window = min(20, args.turns // 2)
    load = os.getloadavg()[0]
    rows = asyncio.run(run(args.turns, window))
    print(f"{args.turns} turns, CPU per turn (ms, mean of {window} turns); load average {load:.1f} at the start")
    print()
    print(f"| reducer | turns 1-{window} | turns {args.turns - window + 1}-{args.turns} | growth |")
    print("|---|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['early']:.2f} | {row['late']:.2f} | {row['late'] / row['early']:.2f}x |")


if __name__ == "__main__":
    main()
