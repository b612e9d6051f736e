"""Benchmark of the copilot HTTP API: many chat streams at once on one real server.

Starts gns3-server through ``gns3server-copilot`` exactly as the integration tests
do (``tests/integration/gns3_process.py``), with the OpenAI-compatible stub LLM
(``tests/support/openai_stub.py``) in a thread of this process. The admin user
gets a project with a few VPCS nodes (so every model call carries a topology)
and an LLM config pointing at the stub. Each chat is a new session whose one
model call streams a ~300-character answer in 4-character chunks; the stub
answers at once, so what is measured is the server: auth, project check,
topology fetch, context preparation, the provider client, persistence, SSE.

Three runs, each of ``--streams`` chats (default 50):

- ``stub direct``: the same completions straight from the stub, concurrently
  (the floor: what the LLM side alone costs);
- ``sequential``: the chats one after another (the naive way to serve them);
- ``concurrent``: all chats at once.

Per run: errors (non-200, ``error`` events, streams without ``done``), p50/p99 of
the time to the first event and to ``done``, wall time, and the server's RSS
(peak while the run lasts, sampled every 20 ms).

Run: ``.venv/bin/python bench/server.py`` (``--write`` puts the table into
docs/performance.md under "## Server (bench/server.py)").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))

from gns3_process import GNS3ServerProcess

from tests.support.openai_stub import OpenAIStub, reply

API_KEY = "sk-bench-0123456789abcdef"
ANSWER = ("All four nodes are up. PC1 reaches R1 on e0, R1 and R2 share the 10.0.12.0/30 link, "
          "and PC3 sits behind R2. Nothing is misconfigured that I can see from the topology; "
          "if pings still fail, check the default gateways on the PCs and the routes on R1 and R2. ")
SECTION = "## Server (bench/server.py)"


@dataclass
class Sample:
    first_event: float | None = None
    done: float | None = None
    error: str | None = None


@dataclass
class Run:
    name: str
    samples: list[Sample] = field(default_factory=list)
    wall: float = 0.0
    peak_rss: int | None = None
    cpu: float | None = None
    """Server CPU time (user + system) spent during the run, in seconds."""

    @property
    def errors(self) -> int:
        return sum(1 for s in self.samples if s.error is not None)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p99 of 50 samples is the slowest one)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


async def read_sse(response: aiohttp.ClientResponse, started: float, sample: Sample) -> None:
    async for line in response.content:
        if not line.startswith(b"data: "):
            continue
        now = time.perf_counter() - started
        if sample.first_event is None:
            sample.first_event = now
        event = json.loads(line[len(b"data: "):])
        if event["type"] == "error":
            sample.error = event.get("code", "error")
        elif event["type"] == "done":
            sample.done = now
            if event["status"] != "completed" and sample.error is None:
                sample.error = event["status"]
            return
    sample.error = sample.error or "no done event"


async def copilot_chat(http: aiohttp.ClientSession, url: str, token: str, number: int) -> Sample:
    sample = Sample()
    started = time.perf_counter()
    body = {"message": f"Why can't PC1 ping PC3? (#{number})"}
    async with http.post(url, json=body, headers={"Authorization": f"Bearer {token}"}) as response:
        if response.status != 200:
            sample.error = f"HTTP {response.status}"
            return sample
        await read_sse(response, started, sample)
    return sample


async def stub_chat(http: aiohttp.ClientSession, base_url: str, number: int) -> Sample:
    sample = Sample()
    started = time.perf_counter()
    body = {"model": "stub-model", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"Why can't PC1 ping PC3? (#{number})"}]}
    async with http.post(f"{base_url}/chat/completions", json=body,
                         headers={"Authorization": f"Bearer {API_KEY}"}) as response:
        async for line in response.content:
            if line.startswith(b"data: ") and sample.first_event is None:
                sample.first_event = time.perf_counter() - started
            if line.startswith(b"data: [DONE]"):
                sample.done = time.perf_counter() - started
    if response.status != 200 or sample.done is None:
        sample.error = f"HTTP {response.status}"
    return sample


async def measure(name: str, pid: int | None, jobs: list[Callable[[], Awaitable[Sample]]], concurrent: bool) -> Run:
    run = Run(name)
    process = psutil.Process(pid) if pid else None
    peak = 0
    stop = asyncio.Event()

    async def sample_rss() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, process.memory_info().rss) if process else 0
            try:
                await asyncio.wait_for(stop.wait(), 0.02)
            except TimeoutError:
                pass

    sampler = asyncio.create_task(sample_rss())
    cpu_before = sum(process.cpu_times()[:2]) if process else 0.0
    started = time.perf_counter()
    if concurrent:
        run.samples = list(await asyncio.gather(*(job() for job in jobs)))
    else:
        run.samples = [await job() for job in jobs]
    run.wall = time.perf_counter() - started
    stop.set()
    await sampler
    run.peak_rss = peak or None
    run.cpu = sum(process.cpu_times()[:2]) - cpu_before if process else None
    return run


def table(runs: list[Run], streams: int, idle_rss: int, cpus: int, load: float) -> str:
    def ms(value: float) -> str:
        return f"{value * 1000:,.0f}"

    lines = [
        (f"{streams} chat streams, one new session each, one model call streaming a {len(ANSWER)}-character "
        f"answer in 4-character chunks from the stub LLM; project with 4 VPCS nodes; {cpus} CPU(s), "
        f"load average {load:.1f} when the runs started (other work on the machine shares the CPUs). "
        f"Server RSS when idle (after one warm-up chat): {idle_rss / 2**20:,.0f} MiB."),
        "",
        ("| run | errors | first event p50 / p99 (ms) | done p50 / p99 (ms) | wall (s) | chats/s "
        "| server CPU per chat (ms) | server RSS peak (MiB) |"),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        ok = [s for s in run.samples if s.error is None and s.first_event is not None and s.done is not None]
        first = [s.first_event for s in ok if s.first_event is not None]
        done = [s.done for s in ok if s.done is not None]
        rss = f"{run.peak_rss / 2**20:,.0f}" if run.peak_rss else "-"
        cpu = f"{run.cpu / len(run.samples) * 1000:,.0f}" if run.cpu is not None else "-"
        lines.append(
            f"| {run.name} | {run.errors} | "
            f"{ms(percentile(first, 50))} / {ms(percentile(first, 99))} | "
            f"{ms(percentile(done, 50))} / {ms(percentile(done, 99))} | "
            f"{run.wall:.2f} | {len(run.samples) / run.wall:.1f} | {cpu} | {rss} |"
        )
    sequential, concurrent = runs[-2], runs[-1]
    speedup = (len(concurrent.samples) / concurrent.wall) / (len(sequential.samples) / sequential.wall)
    per_stream = ((concurrent.peak_rss or idle_rss) - idle_rss) / streams / 2**20
    lines += [
        "",
        (f"Reading it: the concurrent run is {speedup:.2f}x the sequential one's throughput and used "
        f"{concurrent.cpu or 0:.1f} s of server CPU in {concurrent.wall:.1f} s of wall time: one server "
        "process (one event loop, the GIL) is CPU-bound, each chat costing the CPU in the table (request "
        "handling, the project check and topology fetch through GNS3's REST API, graph and context "
        "preparation, the provider client parsing the stream, checkpoints). The 50 streams share that "
        "CPU fairly, so under this load each stream's first event waits for its share. No errors, no "
        f"lost streams; memory grows by about {per_stream:.1f} MiB per concurrent stream."),
    ]
    return "\n".join(lines)


def write_section(body: str, heading: str = SECTION) -> None:
    """Replace (or add) the section ``heading`` of docs/performance.md, leaving the others alone."""
    path = ROOT / "docs" / "performance.md"
    text = path.read_text()
    section = f"{heading}\n\n{body}\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


async def setup(server: GNS3ServerProcess, http: aiohttp.ClientSession, stub: OpenAIStub) -> tuple[str, str]:
    token = await server.token()
    headers = {"Authorization": f"Bearer {token}"}
    base = server.base_url
    async with http.post(f"{base}/v3/projects", json={"name": "bench"}, headers=headers) as response:
        project_id = (await response.json())["project_id"]
    for number in range(1, 5):
        async with http.post(f"{base}/v3/projects/{project_id}/nodes", headers=headers,
                             json={"name": f"PC{number}", "node_type": "vpcs", "compute_id": "local"}) as response:
            assert response.status == 201, await response.text()
    config = {"model": "stub-model", "base_url": stub.base_url, "api_key": API_KEY, "context_limit": 32,
              "max_retries": 0, "timeout": 120}
    async with http.post(f"{base}/v3/copilot/llm-configs", json={"config": config}, headers=headers) as response:
        assert response.status == 201, await response.text()
    return token, f"{base}/v3/copilot/projects/{project_id}/chat/stream"


async def main(streams: int, write: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp, \
            OpenAIStub.in_thread(api_key=API_KEY) as stub:
        server = await asyncio.to_thread(GNS3ServerProcess.start, Path(tmp))
        try:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as http:
                token, url = await setup(server, http, stub)
                stub.enqueue(reply(ANSWER))
                warm = await copilot_chat(http, url, token, 0)
                assert warm.error is None, warm.error
                idle_rss = psutil.Process(server.process.pid).memory_info().rss
                load = os.getloadavg()[0]
                runs = []
                stub.enqueue(*(reply(ANSWER) for _ in range(streams)))
                runs.append(await measure("stub direct (the LLM alone)", None,
                                          [lambda n=n: stub_chat(http, stub.base_url, n) for n in range(streams)], True))
                for name, concurrent in (("copilot, sequential", False), ("copilot, concurrent", True)):
                    stub.enqueue(*(reply(ANSWER) for _ in range(streams)))
                    jobs = [lambda n=n: copilot_chat(http, url, token, n) for n in range(streams)]
                    runs.append(await measure(name, server.process.pid, jobs, concurrent))
        finally:
            server.stop()
        if stub.unscripted:
            print(f"warning: {stub.unscripted} unscripted LLM requests", file=sys.stderr)
    result = table(runs, streams, idle_rss, psutil.cpu_count() or 1, load)
    print(result)
    if write:
        write_section(result + "\n\nRun: `.venv/bin/python bench/server.py --write`.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    asyncio.run(main(args.streams, args.write))
