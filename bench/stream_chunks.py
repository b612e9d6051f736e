"""What a model call's streamed answer and its request body cost the server, in-process: ours against ``ChatOpenAI``.

One streamed chat completion of ``--chunks`` content chunks (4 characters each, as the bench
stub model streams them) then a finish and a usage chunk, served by an in-memory transport
(``httpx.MockTransport``: no socket, no other process, so what is timed is the client's own work),
read through ``model.astream`` and merged into one message as the graph's model call does
(``agent/model/calls.py``'s ``stream_model``, with a no-op stream writer). Two shapes of arrival:
one SSE event per network read (a model producing tokens slower than the server reads them) and
all events in one read (a server behind its model).

*naive*: ``langchain-openai``'s ``ChatOpenAI`` (the OpenAI SDK builds a ``ChatCompletionChunk``
per chunk, ``langchain-openai`` dumps it back to a dict); *ours*: the model the copilot builds
for an OpenAI-compatible server (``create_chat_model`` with a ``base_url``); *before*: the same
model on the SDK's own ``chat.completions`` (what it was before ``agent/model/openai_wire.py``).
All give the same message (checked). ``--profile`` prints cProfile's top functions per path.

The second table is the request body of a long conversation (``--messages``, the bench
conversation's shape: questions, answers, tool calls and outputs): the SDK's encoding of the
whole body (``openapi_dumps``, what every call paid) against ours joined from each message's
kept encoding, with the two messages new since the previous call encoded.

Run: ``.venv/bin/python bench/stream_chunks.py`` (a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import io
import json
import os
import pstats
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any
from unittest import mock

import httpx
from langchain_core.messages import AIMessage, HumanMessage

BASE_URL = "http://model.bench.invalid/v1"


def sse_events(chunks: int, model: str) -> list[bytes]:
    """The SSE events of one streamed answer (as an OpenAI-compatible server sends them)."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": model}
    text = ("All four nodes are up. PC1 reaches R1 on e0, R1 and R2 share the link. " * 64)[: 4 * chunks]

    def event(payload: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return event({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                      "usage": None})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": text[i:i + 4]}) for i in range(0, len(text), 4)]
    events.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 1200, "completion_tokens": chunks, "total_tokens": 1200 + chunks}
    events.append(event({**base, "choices": [], "usage": usage}))
    events.append(b"data: [DONE]\n\n")
    return events


class _Body(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part


def transport(events: list[bytes], one_read: bool) -> httpx.MockTransport:
    parts = [b"".join(events)] if one_read else events

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(parts))

    return httpx.MockTransport(answer)


def models(mock_transport: httpx.MockTransport) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    from gns3server.agent.gns3_copilot.agent.model import factory

    client = httpx.AsyncClient(transport=mock_transport)
    config = {"model": "bench-model", "base_url": BASE_URL, "api_key": "sk-bench", "context_limit": 128,
              "max_retries": 0, "timeout": 30}
    with mock.patch.object(factory, "_no_redirect_clients", return_value=(httpx.Client(), client)):
        ours = factory.create_chat_model(config)
        before = factory.create_chat_model(config)
    bound = before.chunk_timeout  # langchain-openai's own chunk bound again, as before
    before.async_client, before.stream_chunk_timeout = before.async_client.wrapped, bound
    naive = ChatOpenAI(model="bench-model", base_url=BASE_URL, api_key=SecretStr("sk-bench"), max_retries=0, timeout=30,
                       streaming=True, stream_usage=True, http_async_client=client)
    return {"naive": naive, "before": before, "ours": ours}


async def one_answer(model: Any) -> AIMessage:
    from gns3server.agent.gns3_copilot.agent.model.calls import stream_model

    with mock.patch("gns3server.agent.gns3_copilot.agent.model.calls.get_stream_writer", return_value=lambda _: None):
        answer = await stream_model(model, [HumanMessage("status?")], {})
    assert answer is not None
    return answer


def same(a: AIMessage, b: AIMessage) -> bool:
    return (a.content, a.tool_calls, a.usage_metadata, a.response_metadata.get("finish_reason")) == (
        b.content, b.tool_calls, b.usage_metadata, b.response_metadata.get("finish_reason"))


async def timed(model: Any, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await one_answer(model)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def run(args: argparse.Namespace) -> None:
    rows = []
    for one_read in (False, True):
        events = sse_events(args.chunks, "bench-model")
        built = models(transport(events, one_read))
        answers = {name: await one_answer(model) for name, model in built.items()}
        assert same(answers["naive"], answers["ours"]) and same(answers["before"], answers["ours"]), answers
        for name, model in built.items():
            await timed(model, 3)  # warm
        results = {name: statistics.median(await timed(model, args.repeats)) for name, model in built.items()}
        rows.append((one_read, results))
        if args.profile:
            for name, model in built.items():
                profiler = cProfile.Profile()
                profiler.enable()
                await timed(model, args.repeats)
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
                print(f"--- {name}, {'one read' if one_read else 'a read per event'}\n{out.getvalue()}")
    n = len(sse_events(args.chunks, "m")) - 1
    print(f"\nOne streamed answer of {args.chunks} content chunks ({n} SSE events), median of {args.repeats}; "
          f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}.\n")
    print("| arrival | naive ms | before ms | ours ms | naive / before / ours µs per chunk | before / ours |")
    print("|---|---:|---:|---:|---:|---:|")
    for one_read, r in rows:
        shape = "all events in one read" if one_read else "one event per read"
        per_chunk = " / ".join(f"{r[k] * 1000 / n:.0f}" for k in ("naive", "before", "ours"))
        print(f"| {shape} | {r['naive']:.2f} | {r['before']:.2f} | {r['ours']:.2f} | {per_chunk} | "
              f"{r['before'] / r['ours']:.2f}x |")
    body_table(args)


def conversation(n: int) -> list[dict[str, Any]]:
    """``n`` message dicts shaped as the bench conversation's: a tool round every fifth turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are GNS3 Copilot. " * 200}]
    turn = 0
    while len(messages) < n:
        messages.append({"role": "user", "content": f"[turn {turn}] Is everything up? Check R1 and R2 ✓."})
        if turn % 5 == 0:
            call = {"id": f"call_{turn}", "type": "function", "function": {"name": "gns3_topology", "arguments": "{}"}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{turn}",
                             "content": "R1 qemu started console 5000 Gi0/0 <-> R2 Gi0/1\n" * 12})
        messages.append({"role": "assistant", "content": "All four nodes are up; R1 and R2 share 10.0.12.0/30. " * 4})
        turn += 1
    return messages[:n]


def _joined(scalars: dict[str, Any], dicts: list[dict[str, Any]], kept: list[bytes], tools: list[Any]) -> bytes:
    """Our body: the kept encodings joined, the two new messages encoded (as a call after a turn)."""
    from gns3server.agent.gns3_copilot.agent.model.openai_wire import EncodedMessages, encode_json, request_body

    fragments = [*kept, *(encode_json(d) for d in dicts[-2:])]
    return request_body({**scalars, "extra_body": {"messages": EncodedMessages(dicts, fragments), "tools": tools}}) or b""


def body_table(args: argparse.Namespace) -> None:
    from openai._utils._json import openapi_dumps

    from gns3server.agent.gns3_copilot.agent.model.openai_wire import encode_json

    print("\n| messages in the request | body KiB | SDK encodes the whole body ms | ours: joined ms | SDK / ours |")
    print("|---:|---:|---:|---:|---:|")
    for n in (20, 200, args.messages):
        dicts = conversation(n)
        kept = [encode_json(d) for d in dicts[:-2]]
        tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "Reads the lab. " * 20,
                                                     "parameters": {"type": "object", "properties": {}}}}
                 for i in range(9)]
        scalars = {"model": "bench-model", "messages": [], "stream": True, "max_tokens": 4096,
                   "stream_options": {"include_usage": True}, "tool_choice": "auto"}
        whole = {**scalars, "messages": dicts, "tools": tools}

        ours = functools.partial(_joined, scalars, dicts, kept, tools)
        assert json.loads(ours()) == json.loads(openapi_dumps(whole))
        times = {}
        for name, encode in (("sdk", functools.partial(openapi_dumps, whole)), ("ours", ours)):
            samples = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                encode()
                samples.append((time.perf_counter() - start) * 1000)
            times[name] = statistics.median(samples)
        size = len(openapi_dumps(whole)) / 1024
        print(f"| {n} | {size:.0f} | {times['sdk']:.3f} | {times['ours']:.3f} | {times['sdk'] / times['ours']:.0f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=300, help="content chunks in the answer (300)")
    parser.add_argument("--repeats", type=int, default=30, help="answers timed per row (30)")
    parser.add_argument("--messages", type=int, default=750, help="messages of the long request (750)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions per path")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
