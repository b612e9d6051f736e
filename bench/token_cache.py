"""Memory of the token-count cache: bounded by the size of the texts it keeps.

A server counts every message of every conversation it serves; the counter's
cache keys hold the message texts, so without a size bound it keeps up to 50,000
of them (long tool outputs included) for the life of the process. This replays
conversations whose tool outputs are 2-32 KiB and measures, with tracemalloc, what
the cache holds once the conversations' own message objects are gone, next to the
entry-bound-only cache (the behaviour before, the same class with no byte bound),
and the time of a cache hit in both.

Run: ``.venv/bin/python bench/token_cache.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from gns3server.agent.gns3_copilot.agent.context.counting import DEFAULT_CACHE_BYTES, TokenCounter


def conversation(seed: int, turns: int) -> list[BaseMessage]:
    rng = random.Random(seed)
    messages: list[BaseMessage] = []
    for turn in range(turns):
        call_id = f"c{seed}-{turn}"
        messages.append(HumanMessage(f"[{seed}/{turn}] why can't PC{turn % 9} ping R{turn % 5}?"))
        messages.append(AIMessage("", tool_calls=[{"name": "gns3_show_commands", "args": {"devices": ["R1"]}, "id": call_id}]))
        size = rng.randint(2048, 32768)
        line = f"GigabitEthernet0/{turn % 4} 10.{seed % 250}.{turn % 250}.1 YES manual up up\n"
        messages.append(ToolMessage((line * (size // len(line) + 1))[:size], tool_call_id=call_id))
        messages.append(AIMessage(f"R1's interface {turn % 4} is up; the route is missing."))
    return messages


def measure(cache_bytes: int, sessions: int, turns: int) -> tuple[int, int, float, float]:
    """(entries, traced MiB held by the counter, seconds to fill, µs per cache hit)."""
    gc.collect()
    tracemalloc.start()
    counter = TokenCounter(cache_bytes=cache_bytes)
    started = time.perf_counter()
    last: list[BaseMessage] = []
    for seed in range(sessions):
        last = conversation(seed, turns)
        counter.messages(last)
    fill = time.perf_counter() - started
    hits = []
    for _ in range(5):
        t0 = time.perf_counter()
        counter.messages(last[-40:])
        hits.append((time.perf_counter() - t0) / 40 * 1e6)
    del last
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    entries, _ = counter.cache_info()
    return entries, held // (1024 * 1024), fill, statistics.median(hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer conversations")
    args = parser.parse_args()
    sessions, turns = (20, 50) if args.quick else (100, 100)
    print(f"{sessions} conversations x {turns} turns (tool outputs 2-32 KiB), then the conversations are dropped")
    print(f"{'cache':<34} {'entries':>8} {'MiB held':>9} {'fill s':>7} {'hit µs':>7}")
    for label, limit in (("entries only (before: 50,000)", 1 << 62), (f"bytes too ({DEFAULT_CACHE_BYTES >> 20} MiB, now)", DEFAULT_CACHE_BYTES)):
        entries, held, fill, hit = measure(limit, sessions, turns)
        print(f"{label:<34} {entries:>8} {held:>9} {fill:>7.2f} {hit:>7.2f}")


if __name__ == "__main__":
    main()
