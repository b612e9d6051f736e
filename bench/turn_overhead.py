"""What a turn costs beyond the model's own time, at 10 and at 500 turns, measured from outside.

A real gns3-server started through ``gns3server-copilot`` (as ``tests/integration`` does)
talks to a streaming OpenAI-compatible stub model run in a process of its own (below:
``--serve-stub``), which timestamps when it has read each request's bytes (before parsing
them, as a model server's parse is its own time) and when it has written its last byte (``time.monotonic``: one clock for every process of the machine). The bench
drives, over the copilot's HTTP API:

- one long session to ``--turns`` turns (500), every fifth asking for a topology tool call
  (two model calls in that turn);
- control sessions of 10 turns, made at the same time as the long session's last turns
  (one control turn after each long one), so both are measured under the same load;
- the same turns made naively in the same run, interleaved with ours: the conversation
  loaded whole from SQLite and written back whole, tokens counted from scratch with
  LangChain's ``trim_messages`` as the design document's code does, the topology read
  through the REST API for each model call, the model called through ``langchain-openai``'s
  ``ChatOpenAI`` with the same system prompt and tool definitions the copilot sent;
- then the server is stopped, the long session copied 20 times in its database (every row
  naming it, under a new id), the server started again, and the 20 copies driven at once
  (``--concurrent`` sessions, ``--concurrent-turns`` turns each);
- the project's notification stream is open throughout, as GNS3's web UI holds it while a
  user works in the project (the copilot's panel lives in that UI);
- the pre-model hook alone on the 2,000-message conversation of ``bench/context.py``:
  a cold call (new hook) and the steady call (an answer and a question appended at each call,
  the window the previous call returned passed in), against a from-scratch count of the same request as the design document does it.

Overhead of a turn: its wall time (request sent to ``done`` read) minus the model's own
time (request read to last byte written, summed over the turn's model calls): the time
before the first model request plus the time after the model's last byte (plus, in a tool
turn, the tool call and the second request's preparation); the table also gives its two ends
apart (before the first model request; after the last model byte). Server CPU per turn: the server
process's user + system time (``/proc``) across the turn.

``--profile DIR`` also records the server with ``py-spy record --format raw`` (a bench
dependency, not the package's: ``pip install py-spy``) over 20 more turns of the long
session and over two new sessions of 10 turns, and prints the functions with the largest
share of samples.

Run: ``.venv/bin/python bench/turn_overhead.py`` (1.5-2 minutes idle, up to 15 under load; ``--quick``: 60 turns,
a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

API_KEY = "sk-bench-turns-0123456789"
ANSWER = ("All four nodes are up. PC1 reaches R1 on e0, R1 and R2 share the 10.0.12.0/30 link, "
          "and PC3 sits behind R2. Nothing is misconfigured that I can see from the topology; "
          "if pings still fail, check the default gateways on the PCs and the routes on R1 and R2. ")
TAG = re.compile(r"\[turn (\S+)\]")
TOOL_MARK = "[topology]"
CONTEXT_LIMIT = 128
WINDOW = 40  # turns measured at each end (10 with --quick): a median of 20 moved by +-2 ms between runs


# ----------------------------------------------------------------- the stub model


def serve_stub() -> None:
    """The stub model (``--serve-stub``): prints its port, then serves until stdin closes."""
    from aiohttp import web

    timings: dict[str, list[tuple[float, float]]] = defaultdict(list)
    captured: dict[str, Any] = {}

    def last_user(messages: list[dict[str, Any]]) -> str:
        for message in reversed(messages):
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return ""

    async def completions(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        received = time.monotonic()  # the request's bytes are in: parsing them is the model's time
        body = json.loads(raw)
        messages = body.get("messages") or []
        question = last_user(messages)
        tag = TAG.search(question)
        if body.get("tools") and "tools" not in captured:
            captured.update(tools=body["tools"], system=messages[0].get("content"))
        last_role = messages[-1].get("role") if messages else None
        call = bool(body.get("tools")) and last_role == "user" and TOOL_MARK in question
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": body.get("model", "stub")}

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        if call:
            await send({"role": "assistant", "tool_calls": [{"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}",
                        "type": "function", "function": {"name": "gns3_topology", "arguments": "{}"}}]})
            await send({}, "tool_calls")
        else:
            text = ANSWER if body.get("tools") else "- PC1..PC4 checked; R1/R2 link up; no change made."
            await send({"role": "assistant", "content": ""})
            for start in range(0, len(text), 4):
                await send({"content": text[start:start + 4]})
            await send({}, "stop")
        prompt = max(1, len(json.dumps(messages)) // 4)
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": prompt, "completion_tokens": 60, "total_tokens": prompt + 60}
            await response.write(b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        if tag:
            timings[tag.group(1)].append((received, time.monotonic()))
        await response.write_eof()
        return response

    async def take_timings(request: web.Request) -> web.Response:
        return web.json_response(timings.pop(request.match_info["tag"], []))

    async def get_captured(request: web.Request) -> web.Response:
        return web.json_response(captured)

    async def main() -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", completions)
        app.router.add_get("/timings/{tag}", take_timings)
        app.router.add_get("/captured", get_captured)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(main())


@contextlib.contextmanager
def stub_process() -> Any:
    process = subprocess.Popen([sys.executable, __file__, "--serve-stub"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield process, f"http://127.0.0.1:{port}"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ----------------------------------------------------------------- measuring


@dataclass
class Turn:
    kind: str
    number: int  # the turn's number in its session (1 = the first)
    overhead: float = 0.0
    before_model: float = 0.0  # request sent -> the first model request received
    after_model: float = 0.0  # the last model byte -> the turn's end
    cpu: float = 0.0
    error: str | None = None

    def timed(self, started: float, ended: float, spans: list[tuple[float, float]]) -> None:
        """The overhead, split at the model's calls (``spans``: each call's request received, last byte)."""
        self.overhead = ended - started - sum(last - received for received, last in spans)
        if spans:
            self.before_model, self.after_model = spans[0][0] - started, ended - spans[-1][1]


@dataclass
class Bench:
    http: aiohttp.ClientSession
    stub: str
    base: str = ""
    token: str = ""
    project_id: str = ""
    pid: int = 0
    turns: list[Turn] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def cpu(self) -> float:
        times = psutil.Process(self.pid).cpu_times()
        return times.user + times.system

    async def model_spans(self, tag: str) -> list[tuple[float, float]]:
        """(request received, last byte written) of each model call the stub took for ``tag``."""
        async with self.http.get(f"{self.stub}/timings/{tag}") as response:
            return [(received, last) for received, last in await response.json()]

    async def ours(self, kind: str, session_id: str, number: int, tool: bool) -> Turn:
        """One turn of ours through the chat API."""
        tag = f"{kind}-{session_id[:8]}-{number}"
        question = f"Why can't PC1 ping PC3 now? {TOOL_MARK if tool else ''} [turn {tag}]"
        body = {"message": question, "session_id": session_id}
        url = f"{self.base}/v3/copilot/projects/{self.project_id}/chat/stream"
        turn = Turn(kind, number)
        cpu = self.cpu()
        started = time.monotonic()
        async with self.http.post(url, json=body, headers=self.headers) as response:
            if response.status != 200:
                turn.error = f"HTTP {response.status}: {(await response.text())[:200]}"
                self.turns.append(turn)
                return turn
            async for line in response.content:
                if not line.startswith(b"data: "):
                    continue
                event = json.loads(line[6:])
                if event["type"] == "error":
                    turn.error = event.get("code") or "error"
                elif event["type"] == "done":
                    if event["status"] != "completed" and turn.error is None:
                        turn.error = event["status"]
                    break
        ended = time.monotonic()
        turn.cpu = self.cpu() - cpu
        spans = await self.model_spans(tag)
        if len(spans) != (2 if tool else 1) and turn.error is None:
            turn.error = f"{len(spans)} model calls"
        turn.timed(started, ended, spans)
        self.turns.append(turn)
        return turn


@contextlib.asynccontextmanager
async def web_ui(bench: Bench) -> Any:
    """The project's notification stream held open while inside, as GNS3's web UI holds it."""
    url = f"{bench.base}/v3/projects/{bench.project_id}/notifications"
    opened = asyncio.get_running_loop().create_future()

    async def listen() -> None:
        async with bench.http.get(url, headers=bench.headers, timeout=aiohttp.ClientTimeout(total=None)) as response:
            assert response.status == 200, await response.text()
            opened.set_result(None)
            async for _ in response.content:
                pass

    task = asyncio.create_task(listen())
    try:
        await asyncio.wait({task, opened}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # the stream could not be opened: say why
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# ----------------------------------------------------------------- the naive turn


def _load_tokenizer() -> None:
    from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding

    get_encoding("cl100k_base")


class Naive:
    """The same turn made the naive way, in this process (see the module docstring)."""

    def __init__(self, bench: Bench, path: Path, captured: dict[str, Any]) -> None:
        from langchain_openai import ChatOpenAI

        from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding
        from gns3server.agent.gns3_copilot.agent.context_manager import resolve_budget

        self.bench = bench
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS history (session_id TEXT PRIMARY KEY, messages TEXT)")
        self.encoding = get_encoding("cl100k_base")
        self.tools = captured["tools"]
        self.prompt = str(captured["system"]).split("### CURRENT TOPOLOGY")[0] + "### CURRENT TOPOLOGY\n{{topology_info}}"
        tools_tokens = len(self.encoding.encode_ordinary(json.dumps(self.tools)))
        self.max_tokens = resolve_budget({"context_limit": CONTEXT_LIMIT})["budget"] - tools_tokens
        self.model = ChatOpenAI(model="stub", base_url=f"{bench.stub}/v1", api_key=API_KEY, streaming=True,
                                stream_usage=True, max_retries=0).bind_tools(self.tools, tool_choice="auto")

    def save(self, session_id: str, messages: list[Any]) -> None:
        from langchain_core.messages import messages_to_dict

        self.db.execute("INSERT OR REPLACE INTO history VALUES (?, ?)", (session_id, json.dumps(messages_to_dict(messages))))
        self.db.commit()

    def load(self, session_id: str) -> list[Any]:
        from langchain_core.messages import messages_from_dict

        row = self.db.execute("SELECT messages FROM history WHERE session_id = ?", (session_id,)).fetchone()
        return messages_from_dict(json.loads(row[0])) if row else []

    async def seed_from(self, session_id: str, naive_id: str) -> None:
        """Give the naive session the history of one of ours (as the API returns it)."""
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        url = f"{self.bench.base}/v3/copilot/projects/{self.bench.project_id}/chat/sessions/{session_id}/history"
        async with self.bench.http.get(url, headers=self.bench.headers) as response:
            data = await response.json()
        messages: list[Any] = []
        for item in data["messages"]:
            if item["role"] == "user":
                messages.append(HumanMessage(item["content"]))
            elif item["role"] == "assistant":
                calls = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in item.get("tool_calls") or []]
                messages.append(AIMessage(item["content"], tool_calls=calls))
            elif item["role"] == "tool":
                messages.append(ToolMessage(item["content"], tool_call_id=item["tool_call_id"], name=item.get("name")))
        self.save(naive_id, messages)

    async def topology(self) -> str:
        base = f"{self.bench.base}/v3/projects/{self.bench.project_id}"
        parts = []
        for path in ("", "/nodes", "/links"):
            async with self.bench.http.get(base + path, headers=self.bench.headers) as response:
                parts.append(await response.json())
        return json.dumps({"project": parts[0], "nodes": parts[1], "links": parts[2]})

    def counter(self, messages: list[Any]) -> int:
        from gns3server.agent.gns3_copilot.agent.context.counting import content_text

        return sum(len(self.encoding.encode_ordinary(content_text(m.content))) for m in messages)

    async def turn(self, kind: str, session_id: str, number: int, tool: bool) -> Turn:
        from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage, trim_messages
        from langchain_core.messages.ai import add_ai_message_chunks
        from langchain_core.messages.utils import message_chunk_to_message

        tag = f"{kind}-{session_id[:8]}-{number}"
        turn = Turn(kind, number)
        cpu = time.process_time()
        started = time.monotonic()
        messages = self.load(session_id)
        messages.append(HumanMessage(f"Why can't PC1 ping PC3 now? {TOOL_MARK if tool else ''} [turn {tag}]"))
        try:
            while True:
                system = SystemMessage(self.prompt.replace("{{topology_info}}", await self.topology()))
                prepared = trim_messages([system, *messages], max_tokens=self.max_tokens, strategy="last",
                                         token_counter=self.counter, include_system=True)
                chunks = [chunk async for chunk in self.model.astream(prepared)]
                answer = message_chunk_to_message(add_ai_message_chunks(chunks[0], *chunks[1:]))
                messages.append(answer)
                if not answer.tool_calls:
                    break
                for call in answer.tool_calls:
                    messages.append(ToolMessage(await self.topology(), tool_call_id=call["id"], name=call["name"]))
            self.save(session_id, messages)
        except Exception as exc:  # noqa: BLE001  # counted as the turn's error
            turn.error = type(exc).__name__
        ended = time.monotonic()
        turn.cpu = time.process_time() - cpu
        turn.timed(started, ended, await self.bench.model_spans(tag))
        self.bench.turns.append(turn)
        return turn


# ----------------------------------------------------------------- set-up


async def setup(bench: Bench, server: Any) -> None:
    bench.base, bench.pid = server.base_url, server.process.pid
    bench.token = await server.token()
    async with bench.http.post(f"{bench.base}/v3/projects", json={"name": "bench-turns"}, headers=bench.headers) as r:
        bench.project_id = (await r.json())["project_id"]
    for number in range(1, 5):
        async with bench.http.post(f"{bench.base}/v3/projects/{bench.project_id}/nodes", headers=bench.headers,
                                   json={"name": f"PC{number}", "node_type": "vpcs", "compute_id": "local"}) as r:
            assert r.status == 201, await r.text()
    config = {"model": "stub-model", "base_url": f"{bench.stub}/v1", "api_key": API_KEY,
              "context_limit": CONTEXT_LIMIT, "max_retries": 0, "timeout": 120}
    async with bench.http.post(f"{bench.base}/v3/copilot/llm-configs", json={"config": config}, headers=bench.headers) as r:
        assert r.status == 201, await r.text()


def clone_session(database: Path, source: str, copies: int) -> list[str]:
    """``copies`` new sessions, each a copy of every row that names ``source`` (server stopped)."""
    ids = [str(uuid.uuid4()) for _ in range(copies)]
    with contextlib.closing(sqlite3.connect(database)) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            key = next((c for c in ("thread_id", "session_id") if c in columns), None)
            if key is None:
                continue
            rows = db.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {key} = ?", (source,)).fetchall()
            index = columns.index(key)
            marks = ", ".join("?" * len(columns))
            for new in ids:
                db.executemany(f"INSERT INTO {table} VALUES ({marks})",
                               [(*row[:index], new, *row[index + 1:]) for row in rows])
        db.commit()
    return ids


# ----------------------------------------------------------------- profiling


@contextlib.contextmanager
def profiled(pid: int, out: Path | None) -> Any:
    if out is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    process = subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--gil",
                                "--output", str(out), "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        process.send_signal(2)
        process.wait(timeout=60)


def top_functions(raw: Path, count: int = 25) -> list[tuple[str, float]]:
    """(function, share of busy samples it is on the stack of) from a py-spy ``--format raw`` file."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, samples = line.rpartition(" ")
        if not samples.isdigit():
            continue  # a line py-spy left unfinished when it was stopped
        frames = stack.split(";")
        if any(idle in frames[-1] for idle in ("select (selectors", "_worker (concurrent", "wait (threading", "poll (")):
            continue
        n = int(samples)
        total += n
        for frame in {re.sub(r":\d+\)", ")", frame) for frame in frames}:
            inclusive[frame] += n
    generic = ("asyncio/", "threading.py", "<module>", "main (", "concurrent/futures", "contextvars")
    ranked = [(name, hits / total) for name, hits in inclusive.most_common() if not any(g in name for g in generic)]
    return ranked[:count]


# ----------------------------------------------------------------- the hook alone


def hook_rows(repeat: int) -> list[dict[str, float]]:
    import context as context_bench  # bench/context.py
    from langchain_core.messages import HumanMessage

    history = context_bench.conversation(2000)
    for i, message in enumerate(history):  # ids, as the checkpointer gives them
        message.id = f"m{i}"
    state = {"messages": history, "topology_info": context_bench.TOPOLOGY}
    cold = context_bench.timed(lambda: context_bench.new_hook()(state), max(3, repeat // 4))
    hook = context_bench.new_hook()
    window = hook(state)["context_window"]
    grown = [*history, HumanMessage("and now?", id="new")]
    steady = context_bench.steady_calls(hook, history, window, repeat)
    baseline = context_bench.timed(lambda: context_bench.baseline(grown), max(3, repeat // 4))
    return [{"cold": cold, "steady": steady, "baseline": baseline}]


# ----------------------------------------------------------------- the run


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def pct_ms(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, -(-len(ordered) * pct // 100) - 1))] * 1000


async def run(args: argparse.Namespace) -> str:
    from gns3_process import GNS3ServerProcess

    window = 10 if args.quick else WINDOW
    turns = args.turns or (60 if args.quick else 500)
    concurrent_turns = args.concurrent_turns or (3 if args.quick else 10)
    restart_turn = turns + 100  # the number of each copy's first turn after the restart
    profile_dir = Path(args.profile).resolve() if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    started_at = time.monotonic()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as tmp, stub_process() as (_, stub_url):
        root = Path(tmp)
        timeout = aiohttp.ClientTimeout(total=900)
        # Idle connections dropped before uvicorn's 5 s keep-alive ends them (a request on one it closed fails).
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            bench = Bench(http, stub_url)
            server = await asyncio.to_thread(GNS3ServerProcess.start, root / "server")
            ui = contextlib.AsyncExitStack()
            try:
                await setup(bench, server)
                await ui.enter_async_context(web_ui(bench))
                long_id = str(uuid.uuid4())
                first = await bench.ours("warm", long_id, 1, False)
                assert first.error is None, first.error
                async with http.get(f"{stub_url}/captured") as response:
                    await asyncio.to_thread(_load_tokenizer)  # the naive side's, off this loop
                    naive = Naive(bench, root / "naive.sqlite3", await response.json())
                for number in range(2, turns - window + 1):
                    turn = await bench.ours("long-early" if number <= 10 else "long", long_id, number, number % 5 == 0)
                    if turn.error:
                        raise RuntimeError(f"turn {number} of the long session failed: {turn.error}")
                    if number % 100 == 0:
                        print(f"... {number} turns ({time.monotonic() - started_at:.0f} s)", file=sys.stderr)
                naive_long = str(uuid.uuid4())
                await naive.seed_from(long_id, naive_long)
                controls = [str(uuid.uuid4()) for _ in range(window // 10)]
                naive_controls = [str(uuid.uuid4()) for _ in range(window // 10)]
                for step, number in enumerate(range(turns - window + 1, turns + 1)):
                    tool = number % 5 == 0
                    control, n = divmod(step, 10)
                    await bench.ours("ours@long", long_id, number, tool)
                    await bench.ours("ours@10", controls[control], n + 1, (n + 1) % 5 == 0)
                    await naive.turn("naive@long", naive_long, number, tool)
                    await naive.turn("naive@10", naive_controls[control], n + 1, (n + 1) % 5 == 0)
                if profile_dir:
                    with profiled(bench.pid, profile_dir / "long.raw"):
                        for number in range(turns + 1, turns + 21):
                            await bench.ours("profile", long_id, number, number % 5 == 0)
                    with profiled(bench.pid, profile_dir / "short.raw"):
                        for _ in range(2):
                            session = str(uuid.uuid4())
                            for n in range(1, 11):
                                await bench.ours("profile", session, n, n % 5 == 0)
            except BaseException:
                print(server.log_tail(60), file=sys.stderr)
                raise
            finally:
                await ui.aclose()
                server.stop()
            database = next((root / "server").rglob("copilot.sqlite3"))
            copies = clone_session(database, long_id, args.concurrent)
            server = await asyncio.to_thread(GNS3ServerProcess.start, root / "server")
            try:
                bench.base, bench.pid = server.base_url, server.process.pid
                bench.token = await server.token()

                async def drive(session_id: str) -> None:
                    for n in range(concurrent_turns):
                        await bench.ours("concurrent", session_id, restart_turn + n, n % 5 == 4)

                async with web_ui(bench):
                    cpu = bench.cpu()
                    wall = time.monotonic()
                    with profiled(bench.pid, profile_dir / "concurrent.raw" if profile_dir else None):
                        await asyncio.gather(*(drive(s) for s in copies))
                concurrent_cpu, concurrent_wall = bench.cpu() - cpu, time.monotonic() - wall
            finally:
                server.stop()

    by_kind: dict[str, list[Turn]] = defaultdict(list)
    for turn in bench.turns:
        by_kind[turn.kind].append(turn)

    def ok(kind: str) -> list[Turn]:
        return [t for t in by_kind[kind] if t.error is None]

    def row(name: str, kind: str, cpu: float | None = None) -> str:
        """``cpu``: the run's CPU per turn, when turns overlap (each turn's own reading counts the others')."""
        good = ok(kind)
        errors = len(by_kind[kind]) - len(good)
        per_turn = statistics.mean(t.cpu for t in good) if cpu is None and good else cpu or 0.0
        return (f"| {name} | {len(by_kind[kind])} | {errors} | {median_ms([t.overhead for t in good]):.1f} "
                f"| {pct_ms([t.overhead for t in good], 95):.1f} | {median_ms([t.before_model for t in good]):.1f} "
                f"| {median_ms([t.after_model for t in good]):.1f} | {per_turn * 1000:.1f} |")

    first_after_restart = [t.overhead for t in ok("concurrent") if t.number == restart_turn]
    later = [t.overhead for t in ok("concurrent") if t.number != restart_turn]
    ours10 = median_ms([t.overhead for t in ok("ours@10")])
    ours_long = median_ms([t.overhead for t in ok("ours@long")])
    naive10 = median_ms([t.overhead for t in ok("naive@10")])
    naive_long = median_ms([t.overhead for t in ok("naive@long")])
    lines += [
        (f"{turns} turns in the long session (every fifth a topology tool call: two model calls), "
        f"context_limit {CONTEXT_LIMIT} balanced, a project of 4 VPCS nodes; {psutil.cpu_count()} CPU(s), "
        f"load average {load:.1f} at the start; {time.monotonic() - started_at:.0f} s in all."),
        "",
        ("| turns | n | errors | overhead median ms | overhead p95 ms | before the model median ms "
         "| after the model median ms | server CPU per turn ms |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        row("ours, 10-turn sessions (turns 1-10)", "ours@10"),
        row(f"ours, long session (turns {turns - window + 1}-{turns})", "ours@long"),
        row("naive, 10-turn sessions (turns 1-10)", "naive@10"),
        row(f"naive, long session (turns {turns - window + 1}-{turns})", "naive@long"),
        row(f"ours, {args.concurrent} copies of the long session at once ({concurrent_turns} turns each)", "concurrent",
            concurrent_cpu / max(1, len(by_kind["concurrent"]))),
        "",
        (f"Ours: {ours_long / ours10:.2f}x the 10-turn overhead at {turns} turns (naive: {naive_long / naive10:.2f}x); "
        f"naive / ours: {naive10 / ours10:.1f}x at 10 turns, {naive_long / ours_long:.1f}x at {turns}. "
        f"Naive CPU is this process's (it runs here); ours the server's. "
        f"Concurrent: p95 / median {pct_ms([t.overhead for t in ok('concurrent')], 95) / median_ms([t.overhead for t in ok('concurrent')]):.2f}, "
        f"{concurrent_cpu / max(1, len(by_kind['concurrent'])) * 1000:.1f} ms of server CPU per turn, "
        f"{len(by_kind['concurrent']) / concurrent_wall:.1f} turns/s."),
        (f"Concurrent, each copy's first turn after the restart (a checkpoint read from rows, a cold hook "
         f"call, every message of the request converted): overhead median {median_ms(first_after_restart):.1f} ms, "
         f"p95 {pct_ms(first_after_restart, 95):.1f} ms; its later turns: median {median_ms(later):.1f} ms, "
         f"p95 {pct_ms(later, 95):.1f} ms."),
    ]
    failures = Counter(t.error for t in bench.turns if t.error)
    if failures:
        lines += ["", "Errors: " + "; ".join(f"{n} x {error}" for error, n in failures.most_common(5))]
    hook = hook_rows(5 if args.quick else 20)[0]
    lines += [
        "",
        "| pre-model hook at 2,000 messages | ms |",
        "|---|---:|",
        f"| cold (new hook) | {hook['cold']:.1f} |",
        f"| steady (an answer and a question appended per call, stored window) | {hook['steady']:.2f} |",
        f"| from-scratch count (trim_messages + tiktoken, as the design document) | {hook['baseline']:.1f} |",
        f"| from-scratch / steady | {hook['baseline'] / hook['steady']:.0f}x |",
    ]
    if profile_dir:
        for name in ("long", "short", "concurrent"):  # concurrent: --concurrent-turns 1 for the first round alone
            lines += ["", f"py-spy, {name} session(s): share of busy samples (inclusive)", ""]
            lines += [f"- {share:5.1%} {function}" for function, share in top_functions(profile_dir / f"{name}.raw")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 turns, short windows: a few minutes")
    parser.add_argument("--turns", type=int, default=0, help="turns of the long session (default 500; 60 quick)")
    parser.add_argument("--concurrent", type=int, default=20, help="copies of the long session driven at once")
    parser.add_argument("--concurrent-turns", type=int, default=0, help="turns each (default 10; 3 quick)")
    parser.add_argument("--profile", metavar="DIR", help="record the server with py-spy into DIR")
    parser.add_argument("--serve-stub", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub:
        serve_stub()
        return
    print(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
