"""Benchmark of the console policy's check: time per line, ours next to a naive matcher.

The policy parses a line with the device family's grammar, then matches every
command it runs against ~80 patterns. Patterns with ``...`` are matched by
dynamic programming (``grammar/patterns.py``); the naive baseline, in the same
run, is plain recursive backtracking over word slices (how the first policy
matched), fed the same canonical words. Lines: everyday ones, and the worst a
tool call may carry (1,000 characters: many words, many pipes, many ``-exec``).

A second table times the FRR grammar's whole-line abbreviation resolution (a line
matched against the ~2,800 command syntaxes vtysh lists): ours looks up the
syntaxes a line's first word may begin, the naive baseline tries every syntax.

Run: ``.venv/bin/python bench/console_policy.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gns3server.agent.gns3_copilot.console import load_policy
from gns3server.agent.gns3_copilot.console.grammar import frr
from gns3server.agent.gns3_copilot.console.grammar.patterns import Pattern, Repeat, Word
from gns3server.agent.gns3_copilot.console.policy import _ANALYZERS

LINES: list[tuple[str, str | None, str]] = [
    ("show (IOS)", "ios", "show ip interface brief | include up"),
    ("pipeline (Linux)", "linux", "ps aux | grep -v grep | sort -k3 -nr | head -5"),
    ("sudo sh -c (Linux)", "linux", "sudo -u root -- bash -lc 'ls /tmp; cat /etc/hosts'"),
    ("1000 chars: sed -i x250", "linux", ("sed " + "-i " * 250 + "a " * 240)[:1000]),
    ("1000 chars: cp 300 args", "linux", ("cp " + "a " * 300)[:1000]),
    ("1000 chars: 150 pipes", "linux", " | ".join(["grep x"] * 150)[:1000]),
    ("1000 chars: copy 495 args", "ios", ("copy " + "a " * 495)[:1000]),
    # A node whose CLI is not known: the line is judged in all thirteen families' grammars.
    ("show, no family", None, "show ip interface brief | include up"),
    ("1000 chars: cp, no family", None, ("cp " + "a " * 300)[:1000]),
]


FRR_LINES: list[tuple[str, str]] = [
    ("w (is write)", "w"),
    ("sh ip ospf nei", "sh ip ospf nei"),
    ("show bgp neighbors ... json", "show ip bgp neighbors 10.0.0.2 advertised-routes json"),
    ("clear ip bgp * soft", "clear ip bgp * soft"),
    ("1000 chars: find 495 words", ("find " + "a " * 495)[:1000]),
    ("1000 chars: show 495 words", ("show " + "a " * 495)[:1000]),
]


def _naive_readings(table: frr.CommandSet, words: Sequence[str]) -> list[tuple[str, ...]]:
    """Every syntax tried on the line: the baseline."""
    every = {s: None for syntaxes in table.by_first.values() for s in syntaxes}
    return [got for s in (*every, *table.anywhere) for end, got in frr._match(s, words, 0) if end == len(words)]


def _naive(tokens: Sequence[object], words: Sequence[str]) -> bool:
    """Recursive backtracking on slices: the baseline."""
    if not tokens:
        return True
    head, rest = tokens[0], tokens[1:]
    if head == "$":
        return not words
    if head == "...":
        return any(_naive(rest, words[i:]) for i in range(len(words) + 1))
    if isinstance(head, Repeat):
        i = 0
        while True:
            if _naive(rest, words[i:]):
                return True
            if i < len(words) and head.word.matches(words[i]):
                i += 1
                continue
            return False
    if not words:
        return False
    if head == "*" or (isinstance(head, Word) and head.matches(words[0])):
        return _naive(rest, words[1:])
    return False


def _time(fn: Callable[[], object], budget: float) -> tuple[float, int]:
    runs, times, start = 0, [], time.perf_counter()
    while time.perf_counter() - start < budget or runs < 3:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        runs += 1
    return statistics.median(times), runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    budget = 0.2 if parser.parse_args().quick else 1.5
    policy = load_policy()
    patterns: list[Pattern] = [p for rule in policy.dangerous for ps in rule.patterns.values() for p in ps]
    print(f"{len(patterns)} dangerous patterns; median time per call")
    print(f"{'line':28} {'check() ms':>11} {'match ours ms':>14} {'match naive ms':>15} {'naive/ours':>11}")
    for name, family, line in LINES:
        analysis = _ANALYZERS[family or "linux"](line)
        # Each lambda is timed and dropped within its iteration: the loop variables it reads are current.
        check, _ = _time(lambda: policy.check(line, family=family, read_only=False), budget)  # noqa: B023
        ours, _ = _time(lambda: [p.matches(w) for w in analysis.commands for p in patterns], budget)  # noqa: B023
        naive, _ = _time(lambda: [_naive(p.tokens, w) for w in analysis.commands for p in patterns], budget)  # noqa: B023
        print(f"{name:28} {check * 1e3:11.3f} {ours * 1e3:14.3f} {naive * 1e3:15.3f} {naive / ours:10.1f}x")
    table = frr.commands()
    print(f"\nFRR abbreviations: {sum(len(v) for v in table.by_first.values())} syntaxes indexed by first keyword;"
          " median time per line")
    print(f"{'line':28} {'check() ms':>11} {'resolve ours ms':>16} {'resolve naive ms':>17} {'naive/ours':>11}")
    for name, line in FRR_LINES:
        words = line.split()
        assert sorted(table.readings(words)) == sorted(set(_naive_readings(table, words))), name
        check, _ = _time(lambda: policy.check(line, family="frr", read_only=True), budget)  # noqa: B023
        ours, _ = _time(lambda: table.readings(words), budget)  # noqa: B023
        naive, _ = _time(lambda: _naive_readings(table, words), budget)  # noqa: B023
        print(f"{name:28} {check * 1e3:11.3f} {ours * 1e3:16.3f} {naive * 1e3:17.3f} {naive / ours:10.1f}x")


if __name__ == "__main__":
    main()
