"""How much of each request a prompt cache can reuse: the history window against the plain trim.

Providers bill the prefix a request shares with the previous one at a fraction of
the price, and local servers skip re-reading it. This replays agent conversations
(``bench/context.py``'s: question, tool call, 50-3000-token output, answer) at
context_limit 8, 16 and 128 (balanced), with the copilot's own system prompt and
tool definitions as it fits them to each window (lab automation mode), sending a
request where the copilot does: at each user message and after each tool round
(``call``); and, as the issue measured it, at user messages only (``question``:
then every request also carries a whole new turn, which no cache can have seen).
Per variant:

- ``cacheable once full``: over the requests after the budget was first
  exceeded, the share of tokens in the longest message prefix identical to the
  previous request's (tool definitions included: they come first and never change);
- ``uncached``: the tokens of all requests outside that prefix (what is billed
  at full price, or re-read by a local server);
- ``ceiling``: the share once full of tokens in messages the previous request also
  carried: what any trimming could at best have cached (the new messages never are);
- ``turns kept``: user turns in a request, on average once full;
- ``masked saved``: tokens the masked tool outputs saved per request, on average once full.

Two conversation shapes: ``agent`` (tool outputs of 50-3000 tokens) and
``short`` (50-600). Variants, in the same run: ``plain`` (the trim before the window: fill the
budget, newest turns first, nothing remembered: ``context_low_water`` 1.0,
no masking, no window state), ``window`` (low-water cut kept in the state, no
masking), ``window+mask`` (masking, no cap on one output), ``window+mask+cap`` (one
tool output at most ``tool_output_share`` 0.1 of the message budget: the defaults with
``context_summary: false``) and ``window+mask+cap+summary`` (**the defaults**: a
synthetic summary as long as the copilot lets one be at that budget, started where
the copilot starts one (when the next cut is planned, or at a cut no summary was
ready for) and taken at the next question, as the graph does; the hook places it).

Run: ``.venv/bin/python bench/cache.py`` (``--limits 8,16`` for those two only, at full
size; ``--quick`` for a smoke run). ``--per-request [FILE]`` adds, after the tables, one row per
request (conversation, limit, requests at, variant, request number, the message it is sent at,
tokens sent, tokens of the longest prefix identical to the previous request's, whether the
budget was full by then); to FILE if given (CSV if it ends in ``.csv``, else the same table).
"""

from __future__ import annotations

import argparse
import csv
import functools
import random
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

from context import TOPOLOGY, conversation, text_of

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter, message_key
from gns3server.agent.gns3_copilot.agent.context.summary import summary_bounds
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.model.prompts import compact_system_prompt_for, system_prompt_for
from gns3server.agent.gns3_copilot.agent.policies.small_window import fit_to_window
from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices, RunContext, build_tools

NO_CAP = {"tool_output_share": 1.0}
VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {"context_low_water": 1.0, "mask_tool_outputs": False, **NO_CAP, "remember": False, "summary": False},
    "window": {"mask_tool_outputs": False, **NO_CAP, "remember": True, "summary": False},
    "window+mask": {**NO_CAP, "remember": True, "summary": False},
    "window+mask+cap": {"remember": True, "summary": False},
    "window+mask+cap+summary": {"remember": True, "summary": True},
}


def short_turns(n_messages: int, seed: int = 7) -> list[BaseMessage]:
    """Lighter turns than ``conversation``: tool outputs of 50-600 tokens, answers of 50-200."""
    rng = random.Random(seed)
    messages: list[BaseMessage] = []
    turn = 0
    while len(messages) < n_messages:
        call_id = f"call_{turn}"
        node = f"R{turn % 30}"
        messages += [
            HumanMessage(f"Question {turn}: is {node} forwarding to R{(turn + 1) % 30}?"),
            AIMessage("", tool_calls=[{"name": "run_show_command", "args": {"node": node, "command": "show ip route"}, "id": call_id}]),
            ToolMessage(text_of(rng, rng.randint(50, 600)), tool_call_id=call_id, name="run_show_command"),
            AIMessage(text_of(rng, rng.randint(50, 200))),
        ]
        turn += 1
    return messages[:n_messages]


PROFILES = {"agent": conversation, "short": short_turns}


def synthetic_summary(cut: int, message_budget: int, counter: TokenCounter) -> str:
    """A summary as long as the copilot lets the model write one at this budget (``summary_bounds``)."""
    size = summary_bounds(message_budget)[0]
    words = [f"cut {cut}:"]
    while counter.text(" ".join(words)) < size - 4:
        words.append("R1 ospf")
    return " ".join(words)


async def _never_asked(privilege: str, path: str) -> str:
    return "denied"  # the tools are only measured here, never run


@functools.cache
def copilot_offer(limit: int) -> tuple[str, list[Any]]:
    """The system prompt and tool definitions the copilot sends at this window (lab automation).

    They come first in every request and never change: what a cache can always reuse,
    and what the history's budget is left after.
    """
    # The audit log is never written (the tools never run); one per window size, built once.
    console = ConsoleServices(load_policy(), DeviceLocks(), AuditLog(tempfile.gettempdir()), lambda user_id: _never_asked)
    tools = build_tools(RunContext(lambda: None, "p", "u", "s"), console)
    mode = "lab_automation"
    fit = fit_to_window(tools, system_prompt_for(mode), compact_system_prompt_for(mode),
                        {"context_limit": limit}, TokenCounter())
    return fit.system_prompt, list(fit.tools)


def _hook(limit: int, options: Mapping[str, Any]):
    config = {"context_limit": limit, "context_strategy": "balanced"}
    config.update({k: v for k, v in options.items() if k not in ("remember", "summary")})
    config["context_summary"] = bool(options.get("summary"))
    prompt, tools = copilot_offer(limit)
    return create_pre_model_hook(prompt, lambda s: TOPOLOGY, lambda: config, lambda: tools)


def request_points(messages: list[BaseMessage], per: str) -> list[int]:
    """Where a request is sent: at every user message, or (``per="call"``) also after each tool round."""
    points = []
    for i, m in enumerate(messages):
        if isinstance(m, HumanMessage) or per == "call" and isinstance(m, ToolMessage) and (i + 1 == len(messages) or not isinstance(messages[i + 1], ToolMessage)):
            points.append(i)
    return points


def replay(messages: list[BaseMessage], limit: int, options: Mapping[str, Any], per: str = "call") -> dict[str, Any]:
    """Send the requests the copilot would send; measure what repeats the previous request.

    The figures over the whole replay, and ``per_request``: for each request, where it is sent
    (``at``: index of the conversation's message), its tokens (``sent``), those of its longest
    prefix identical to the previous request's (``shared``) and whether the budget was full by then.
    """
    hook = _hook(limit, options)
    counter = TokenCounter()
    for i, message in enumerate(messages):  # ids, as the checkpointer gives them
        message.id = message.id or f"m{i}"
    starts = request_points(messages, per)
    window = summary = landing = None
    previous: list[Any] | None = None
    full = False
    cached_full = total_full = new_full = uncached = requests_full = turns_full = saved_full = 0
    cuts = 0
    per_request: list[dict[str, Any]] = []
    for index in starts:
        # A summary started at a planned cut (or at a cut it was not ready for) has come back
        # since: as in the graph, it is taken at the next question (the hook places it).
        if landing is not None and isinstance(messages[index], HumanMessage):
            summary, landing = landing, None
        state = {"messages": messages[: index + 1], "context_window": window, "context_summary": summary}
        out = hook(state)
        report = out["context_report"]
        if options["remember"]:
            window = out["context_window"]
            covered = max((summary or {}).get("until", 0), (landing or {}).get("until", 0))
            if options["summary"] and report["cut_planned"]:
                until, until_id = window["planned"], window["planned_id"]
            elif options["summary"] and report["window_moved"] and window["start"] > covered:
                until, until_id = window["start"], window["start_id"]
            else:
                until = 0
            if until:
                cuts += 1
                landing = {"text": synthetic_summary(cuts, report["message_budget"], counter),
                           "until": until, "until_id": until_id, "turns": cuts}
        keys = [message_key(m) for m in out["messages"]]
        shared = report["tools_tokens"]
        if previous is not None:
            for key, before, message in zip(keys, previous, out["messages"]):
                if key != before:
                    break
                shared += counter.message(message)
            # Messages the previous request did not carry at all: no cache can have them.
            seen = set(previous)
            new = sum(counter.message(m) for k, m in zip(keys, out["messages"]) if k not in seen)
        else:
            shared = new = 0
        previous = keys
        total = report["total_tokens"]
        uncached += total - shared
        full = full or report["messages_dropped"] > 0
        per_request.append({"request": len(per_request) + 1, "at": index, "sent": total, "shared": shared, "full": full})
        if full:
            requests_full += 1
            cached_full += shared
            total_full += total
            new_full += new
            turns_full += sum(1 for m in out["messages"] if isinstance(m, HumanMessage))
            saved_full += report["masked_tokens_saved"]
    return {
        "requests": len(starts),
        "requests_full": requests_full,
        "cacheable_full": cached_full / total_full if total_full else float("nan"),
        "ceiling_full": 1 - new_full / total_full if total_full else float("nan"),
        "uncached": uncached,
        "turns_kept": turns_full / requests_full if requests_full else float("nan"),
        "masked_saved": saved_full / requests_full if requests_full else float("nan"),
        "per_request": per_request,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| conversation | limit | messages | requests at | variant | requests (full) | cacheable once full "
            "| ceiling | uncached tokens | vs plain | turns kept | masked saved |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['profile']} | {r['limit']}K | {r['messages']} | {r['per']} | {r['variant']} | {r['requests']} ({r['requests_full']}) "
            f"| {100 * r['cacheable_full']:.1f}% | {100 * r['ceiling_full']:.1f}% | {r['uncached']:,} | {r['vs_plain']:.2f}x "
            f"| {r['turns_kept']:.1f} | {r['masked_saved']:,.0f} |"
        )
    return "\n".join(lines)


PER_REQUEST_COLUMNS = ("conversation", "limit", "requests at", "variant", "request", "at message",
                       "tokens sent", "shared prefix tokens", "budget full")


def per_request_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One tuple per request of every replay in ``rows`` (the aggregate rows, with their ``per_request``)."""
    return [
        (r["profile"], f"{r['limit']}K", r["per"], r["variant"], q["request"], q["at"], q["sent"], q["shared"],
         "yes" if q["full"] else "no")
        for r in rows for q in r["per_request"]
    ]


def write_per_request(rows: list[dict[str, Any]], out: TextIO, as_csv: bool = False) -> None:
    """The per-request table, as CSV or as a Markdown table like the others."""
    lines = per_request_rows(rows)
    if as_csv:
        writer = csv.writer(out)
        writer.writerow(PER_REQUEST_COLUMNS)
        writer.writerows(lines)
        return
    out.write("| " + " | ".join(PER_REQUEST_COLUMNS) + " |\n")
    out.write("|" + "---|" * len(PER_REQUEST_COLUMNS) + "\n")
    out.writelines("| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in line) + " |\n"
                   for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller conversations, for a smoke run")
    parser.add_argument("--limits", default="8,16,128", help="context limits to run, of 8,16,128 (full sizes)")
    parser.add_argument("--per-request", nargs="?", const="-", metavar="FILE",
                        help="also a row per request: printed, or written to FILE (CSV if it ends in .csv)")
    args = parser.parse_args()
    sizes = {8: 300, 16: 500, 128: 2000}
    cases = [(k, sizes[k]) for k in map(int, args.limits.split(","))] if not args.quick else [(8, 120), (16, 200)]
    rows = []
    for profile, make in PROFILES.items():
        for limit, n in cases:
            for per in ("call", "question"):
                plain_uncached = None
                for name, options in VARIANTS.items():
                    result = replay(make(n), limit, options, per)
                    plain_uncached = plain_uncached or result["uncached"]
                    rows.append({"profile": profile, "limit": limit, "messages": n, "per": per, "variant": name,
                                 **result, "vs_plain": result["uncached"] / plain_uncached})
                    print(f"  {profile} {limit}K {n} {per} {name}: done", file=sys.stderr, flush=True)
    print(table(rows))
    if args.per_request == "-":
        print()
        write_per_request(rows, sys.stdout)
    elif args.per_request:
        with open(args.per_request, "w", encoding="utf-8", newline="") as out:
            write_per_request(rows, out, as_csv=args.per_request.endswith(".csv"))
        print(f"\nPer-request table written to {args.per_request}", file=sys.stderr)


if __name__ == "__main__":
    main()
