"""How long building the console drivers takes at start-up, and what it costs the event loop.

``registry.Drivers.load()`` reads scrapli's platform data for the ten vendor families and
builds every driver in a worker thread; the naive baseline calls ``load_drivers()`` on the
event loop. Each is run in a fresh interpreter (the first load imports scrapli: the cost a
server pays once), with a 1 ms ticker beside it (``loop_stalls``). Run:
``.venv/bin/python bench/console_drivers.py``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 5
_ONE = """
import asyncio, json, sys, time
sys.path.insert(0, {bench!r})
from loop_stalls import loop_stalls
from gns3server.agent.gns3_copilot.console.families import load_drivers
from gns3server.agent.gns3_copilot.console.registry import Drivers

async def main(mode):
    async with loop_stalls() as stalls:
        await asyncio.sleep(0.02)
        started = time.perf_counter()
        drivers = await Drivers.load() if mode == "thread" else load_drivers()
        took = time.perf_counter() - started
        await asyncio.sleep(0.02)
    print(json.dumps({{"ms": took * 1000, "stall": max(stalls), "drivers": len(drivers)}}))

asyncio.run(main(sys.argv[1]))
"""


def run(mode: str) -> dict[str, float]:
    code = _ONE.format(bench=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    started = time.perf_counter()
    rows = {mode: [run(mode) for _ in range(RUNS)] for mode in ("loop", "thread")}
    print(f"console drivers at start-up: {RUNS} fresh interpreters each, median (max)")
    print(f"{'how':34} {'drivers':>7} {'load ms':>14} {'longest loop stall ms':>22}")
    for mode, label in (("loop", "load_drivers() on the loop (naive)"), ("thread", "Drivers.load() (worker thread)")):
        runs = rows[mode]
        ms, stall = [r["ms"] for r in runs], [r["stall"] for r in runs]
        print(f"{label:34} {int(runs[0]['drivers']):>7} {statistics.median(ms):>8.0f} ({max(ms):>3.0f})"
              f" {statistics.median(stall):>15.1f} ({max(stall):>4.1f})")
    print(f"(bench took {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
