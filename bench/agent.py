"""Benchmark of the copilot's own per-turn cost, with an instant scripted LLM.

Everything real except the model: the service, the LangGraph graph, the
pre-model hook, a tool call per turn, and the SQLite checkpointer on disk. The
scripted model answers instantly, so the time measured is our code's.

1. Per-turn overhead for conversations of 10 / 100 / 500 turns (each turn: a
   question, a tool call, its ~1,500-token output, an answer: two LLM calls),
   next to a baseline in the same run that counts tokens the way the design
   document's code does, afresh on every call (a new hook per call, no cache).
2. 20 concurrent sessions on one event loop: events per second, and the event
   loop's longest stall (a 1 ms ticker measures how late it wakes up).
3. Storage: the database's size on disk after 50 / 100 / 200 turns and the
   time per turn, ours (superseded checkpoints pruned after every run) next to
   LangGraph's default of keeping every checkpoint.
4. The token-count cache's cost: one conversation of 200 turns (50 with
   ``--quick``) with the cache bounded by its default 32 MiB, with no byte bound
   (entries only), and with a bound its history overflows (128 KiB, so that
   older messages are counted again): entries and bytes the cache holds after the run
   (``TokenCounter.cache_info``, the memory its texts take) and the time per turn,
   the three taking turns in the same run.

Run: ``.venv/bin/python bench/agent.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any, Self

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from loop_stalls import loop_stalls

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly
from gns3server.agent.gns3_copilot.agent.context.counting import DEFAULT_CACHE_BYTES, TokenCounter
from gns3server.agent.gns3_copilot.agent.context.tokenizer import DEFAULT_ENCODING
from gns3server.agent.gns3_copilot.service.copilot import CopilotService, User
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage
from tests.support.scripted_model import ScriptedChatModel

LLM = {"context_limit": 128, "context_strategy": "balanced", "model": "bench"}
USER = User("u-bench", "bench", "token")
WORDS = ["interface", "GigabitEthernet0/1", "up", "down", "ospf", "neighbor", "10.0.0.1", "FULL/DR"]
TOPOLOGY = {
    "project_id": "p",
    "name": "bench",
    "nodes": [
        {"name": f"R{i}", "node_id": f"n{i}", "node_type": "qemu", "status": "started", "console": 5000 + i,
         "console_host": "127.0.0.1", "console_type": "telnet", "ports": []}
        for i in range(30)
    ],
    "links": [],
}


class FreshCounters(MutableMapping[str, TokenCounter]):
    """Baseline: forgets every counter, so each LLM call counts every message again."""

    def __getitem__(self, key: str) -> TokenCounter:
        raise KeyError(key)

    def __setitem__(self, key: str, value: TokenCounter) -> None:
        pass

    def __delitem__(self, key: str) -> None:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class NullClient:
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def make_tools(context: Any) -> list[Any]:
    rng = random.Random(context.project_id)

    @tool
    async def show_command(node: str, command: str) -> str:
        """Run a show command."""
        return " ".join(rng.choice(WORDS) for _ in range(750))

    show_command.metadata = {"read_only": True}
    return [show_command]


async def topology(client: Any, project_id: str) -> dict[str, Any]:
    return TOPOLOGY


def script_turn(model: ScriptedChatModel, turn: int) -> None:
    model.enqueue(
        AIMessage("", tool_calls=[{"name": "show_command", "args": {"node": "R1", "command": "show ip ospf"}, "id": f"c{turn}"}]),
        AIMessage(f"Turn {turn}: OSPF adjacency on R1 is FULL; the route to 10.0.0.0/24 is present. " * 3),
    )


def make_service(storage: Any, model: ScriptedChatModel, baseline: bool) -> CopilotService:
    agent = AgentAssembly(
        tools_factory=make_tools,
        bind_tools=lambda tools, config: model.bind_tools(tools),
        is_context_length_error=lambda exc: False,
        client_factory=lambda token: NullClient(),
        load_topology=topology,
        counters=FreshCounters() if baseline else None,
    )
    return CopilotService(storage, agent)


async def turn_times(
    turns: int, baseline: bool, data_dir: Path, keep_all: bool = False, counter: TokenCounter | None = None
) -> list[float]:
    """Milliseconds per turn; ``keep_all`` keeps every checkpoint, as LangGraph does by default;
    ``counter``: the one the service counts with (a new default one otherwise)."""
    storage = await open_sqlite_storage(data_dir)
    if keep_all:
        storage._prune = None
    model = ScriptedChatModel(chunk_chars=16)
    service = make_service(storage, model, baseline)
    if counter is not None:
        service.agent._counters[DEFAULT_ENCODING] = counter
    session_id = None
    times = []
    try:
        for turn in range(turns):
            script_turn(model, turn)
            start = time.perf_counter()
            record, stream = await service.chat(USER, "p", f"question {turn}", llm_config=LLM, session_id=session_id)
            async for event in stream:
                if event["type"] == "error":
                    raise RuntimeError(event["message"])
            times.append((time.perf_counter() - start) * 1000)
            session_id = record.session_id
    finally:
        await service.close()
        await storage.close()
    return times


async def concurrent(sessions: int, turns: int, data_dir: Path) -> dict[str, float]:
    storage = await open_sqlite_storage(data_dir)

    async def one(index: int) -> int:
        model = ScriptedChatModel(chunk_chars=16)
        service = make_service(storage, model, baseline=False)
        session_id, count = None, 0
        for turn in range(turns):
            script_turn(model, turn)
            record, stream = await service.chat(USER, "p", f"q{index}.{turn}", llm_config=LLM, session_id=session_id)
            async for _ in stream:
                count += 1
            session_id = record.session_id
        return count

    async with loop_stalls() as stalls:
        start = time.perf_counter()
        counts = await asyncio.gather(*(one(i) for i in range(sessions)))
        elapsed = time.perf_counter() - start
    await storage.close()
    return {"events": sum(counts), "seconds": elapsed, "max_stall_ms": max(stalls), "p99_stall_ms": statistics.quantiles(stalls, n=100)[98]}


CACHE_BOUNDS = {
    f"{DEFAULT_CACHE_BYTES >> 20} MiB (default)": DEFAULT_CACHE_BYTES,
    "no byte bound (entries only)": 1 << 62,
    "128 KiB (overflowed)": 128 << 10,
}


async def cache_cost(turns: int, rounds: int, data_dir: Path) -> list[tuple[str, int, int, float]]:
    """(bound, entries, bytes held, ms per turn over the last 5 turns, median of rounds) per cache bound.
    The bounds take turns round by round, so that a busy machine's drifting load is shared out."""
    times: dict[str, list[float]] = {name: [] for name in CACHE_BOUNDS}
    held: dict[str, tuple[int, int]] = {}
    names = list(CACHE_BOUNDS)
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            counter = TokenCounter(cache_bytes=CACHE_BOUNDS[name])
            per_turn = await turn_times(turns, False, data_dir / f"cache{i}-{names.index(name)}", counter=counter)
            times[name].append(statistics.median(per_turn[-5:]))
            held[name] = counter.cache_info()
    return [(name, *held[name], statistics.median(times[name])) for name in names]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [10, 50] if args.quick else [10, 100, 500]
    TokenCounter()  # load the encoding outside the timings
    print("| turns | ours: ms per turn (last 5) | baseline: ms per turn (last 5) | baseline / ours |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        await turn_times(3, False, Path(tmp) / "warm-up")  # imports, graph compilation caches
        for turns in sizes:
            ours = statistics.median((await turn_times(turns, False, Path(tmp) / f"o{turns}"))[-5:])
            base = statistics.median((await turn_times(turns, True, Path(tmp) / f"b{turns}"))[-5:])
            print(f"| {turns} | {ours:.1f} | {base:.1f} | {base / ours:.1f}x |")
        result = await concurrent(20, 3 if args.quick else 10, Path(tmp) / "c")
        storage_rows = []
        for turns in [20, 50] if args.quick else [50, 100, 200]:
            row = [turns]
            for keep_all in (False, True):
                where = Path(tmp) / f"s{turns}{keep_all}"
                times = await turn_times(turns, False, where, keep_all=keep_all)
                row += [disk_mb(where), statistics.median(times[-5:])]
            storage_rows.append(row)
        cache_turns, cache_rounds = (50, 3) if args.quick else (200, 3)
        cache_rows = await cache_cost(cache_turns, cache_rounds, Path(tmp))
    print()
    print("| concurrent sessions | events | seconds | events/s | longest loop stall ms | p99 stall ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| 20 | {result['events']} | {result['seconds']:.2f} | {result['events'] / result['seconds']:.0f} "
          f"| {result['max_stall_ms']:.1f} | {result['p99_stall_ms']:.1f} |")
    print()
    print("| turns | ours: database MB | keep all checkpoints: MB | ours: ms per turn | keep all: ms per turn |")
    print("|---:|---:|---:|---:|---:|")
    for turns, ours_mb, ours_ms, all_mb, all_ms in storage_rows:
        print(f"| {turns} | {ours_mb:.1f} | {all_mb:.1f} | {ours_ms:.1f} | {all_ms:.1f} |")
    print()
    print(f"token-count cache after {cache_turns} turns of one conversation (median of {cache_rounds} rounds)")
    print("| cache bound | entries | bytes held (MiB) | ms per turn (last 5) |")
    print("|---|---:|---:|---:|")
    for name, entries, size, ms in cache_rows:
        print(f"| {name} | {entries} | {size / (1 << 20):.2f} | {ms:.1f} |")


def disk_mb(directory: Path) -> float:
    """The copilot database's size on disk (with its WAL)."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 1e6


if __name__ == "__main__":
    asyncio.run(main())
