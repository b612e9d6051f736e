"""Benchmark of the pre-model hook against the design document's naive trimming.

For agent conversations of 50 / 500 / 1000 / 2000 / 4000 messages (turns with tool calls whose
outputs are 50-3000 tokens), context_limit 128 and the balanced strategy, it
measures the hook's latency:

- cold: a new hook (empty caches) on the whole conversation;
- steady: the same hook, each call on the previous call's messages with an answer
  and a new question appended, and the history window the previous call returned
  (as the agent graph calls it turn after turn);
- steady, reloaded: the same, but every message object rebuilt (as LangGraph does
  when it loads a checkpoint), so only a content-keyed cache can help;

next to the baseline the design document describes, run in the same process:
LangChain's ``trim_messages(strategy="last", include_system=True)`` with a plain
tiktoken counter over message contents. Encodings are loaded before timing.

Run: ``.venv/bin/python bench/context.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.tools import tool

from gns3server.agent.gns3_copilot.agent.context.counting import content_text
from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding
from gns3server.agent.gns3_copilot.agent.context_manager import (
    count_tokens,
    create_pre_model_hook,
    estimate_tool_tokens,
    resolve_budget,
)

CONFIG = {"context_limit": 128, "context_strategy": "balanced"}
PROMPT = "You are GNS3 Copilot, a network lab assistant.\n### CURRENT TOPOLOGY\n{{topology_info}}"
TOPOLOGY = "\n".join(f"R{i} qemu started console telnet 127.0.0.1:{5000 + i} links: Gi0/0 <-> R{i + 1} Gi0/1" for i in range(30))
WORDS = ["interface", "GigabitEthernet0/1", "up", "down", "ospf", "neighbor", "10.0.0.1", "vlan", "route", "bgp", "FULL/DR"]


@tool
def gns3_topology(project_id: str) -> str:
    """Read the topology of a GNS3 project."""
    return project_id


@tool
def run_show_command(node: str, command: str) -> str:
    """Run a read-only command on a device console."""
    return node + command


TOOLS = [gns3_topology, run_show_command]


def text_of(rng: random.Random, tokens: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(max(1, tokens // 2)))


def conversation(n_messages: int, seed: int = 42) -> list[BaseMessage]:
    """Agent turns: question, a tool call, its output (50-3000 tokens), an answer."""
    rng = random.Random(seed)
    messages: list[BaseMessage] = []
    turn = 0
    while len(messages) < n_messages:
        call_id = f"call_{turn}"
        messages += [
            HumanMessage(f"Question {turn}: why is R{turn % 30} not reaching R{(turn + 1) % 30}?"),
            AIMessage("", tool_calls=[{"name": "run_show_command", "args": {"node": f"R{turn % 30}", "command": "show ip route"}, "id": call_id}]),
            ToolMessage(text_of(rng, rng.randint(50, 3000)), tool_call_id=call_id, name="run_show_command"),
            AIMessage(text_of(rng, rng.randint(50, 300))),
        ]
        turn += 1
    return messages[:n_messages]


def baseline(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The design document's approach: trim_messages with a tiktoken counter over contents."""
    encoding = get_encoding("cl100k_base")

    def counter(msgs: list[BaseMessage]) -> int:
        return sum(len(encoding.encode_ordinary(content_text(m.content))) for m in msgs)

    budget = resolve_budget(CONFIG)["budget"] - estimate_tool_tokens(TOOLS)
    system = SystemMessage(PROMPT.replace("{{topology_info}}", TOPOLOGY))
    return trim_messages(
        [system, *messages], max_tokens=budget, strategy="last", token_counter=counter, include_system=True
    )


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def steady_calls(hook: Callable, history: list[BaseMessage], window: object, repeat: int) -> float:
    """Median wall time (ms) of ``repeat`` calls, each on the previous call's messages with an answer
    and a new question appended, and the window the previous call returned."""
    messages, samples = list(history), []
    for i in range(repeat):
        messages = [*messages, AIMessage(f"Answer {i}: R{i % 30} is fine.", id=f"answer-{i}"),
                    HumanMessage(f"and now {i}?", id=f"question-{i}")]
        start = time.perf_counter()
        window = hook({"messages": messages, "topology_info": TOPOLOGY, "context_window": window})["context_window"]
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def new_hook() -> Callable:
    return create_pre_model_hook(PROMPT, lambda s: s.get("topology_info"), lambda: CONFIG, lambda: TOOLS)


def bench_size(n: int, repeat: int) -> dict[str, float]:
    history = conversation(n)
    cold = timed(lambda: new_hook()({"messages": history, "topology_info": TOPOLOGY}), max(3, repeat // 4))

    for i, message in enumerate(history):  # ids, as the checkpointer gives them
        message.id = message.id or f"m{i}"
    hook = new_hook()
    # The window the previous call returned goes back in, as the agent graph keeps it in its state.
    window = hook({"messages": history, "topology_info": TOPOLOGY})["context_window"]
    grown = [*history, HumanMessage("and now?", id="new")]

    def reloaded() -> None:
        hook({"messages": [m.model_copy() for m in grown], "topology_info": TOPOLOGY, "context_window": window})

    kept = hook({"messages": grown, "topology_info": TOPOLOGY, "context_window": window})["context_report"]["messages_out"]
    base = timed(lambda: baseline(grown), max(3, repeat // 4))
    return {
        "messages": n,
        "history_tokens": sum(count_tokens(content_text(m.content)) for m in history),
        "kept": kept,
        "cold_ms": cold,
        "steady_ms": steady_calls(hook, history, window, repeat),
        "reloaded_ms": timed(reloaded, repeat),
        "baseline_ms": base,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    parser.add_argument("--sizes", help="comma-separated conversation lengths (messages) instead of the default")
    args = parser.parse_args()
    sizes, repeat = ([50, 200], 5) if args.quick else ([50, 500, 1000, 2000, 4000], 20)
    if args.sizes:
        sizes = [int(n) for n in args.sizes.split(",")]
    get_encoding("cl100k_base")  # load once, outside the timings
    rows = [bench_size(n, repeat) for n in sizes]
    print("| messages | history tokens | kept | cold ms | steady ms | steady (reloaded) ms | baseline ms | baseline / steady |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['messages']} | {r['history_tokens']:,} | {r['kept']} | {r['cold_ms']:.1f} | {r['steady_ms']:.2f} "
            f"| {r['reloaded_ms']:.2f} | {r['baseline_ms']:.1f} | {r['baseline_ms'] / r['steady_ms']:.0f}x |"
        )


if __name__ == "__main__":
    main()
