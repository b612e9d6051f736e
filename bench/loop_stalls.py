"""How late the event loop wakes up, for the benchmarks that run work concurrently on it.

A 1 ms ticker runs beside the measured work; each tick records how much later than
asked it woke up (ms). A long stall means something held the loop (or the GIL).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

TICK = 0.001


@contextlib.asynccontextmanager
async def loop_stalls() -> AsyncIterator[list[float]]:
    """The list of stalls (ms), filled while the block runs."""
    stalls: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            before = loop.time()
            await asyncio.sleep(TICK)
            stalls.append((loop.time() - before - TICK) * 1000)

    task = asyncio.create_task(ticker())
    try:
        yield stalls
    finally:
        stop.set()
        await task
