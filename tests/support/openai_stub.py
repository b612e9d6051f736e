"""An OpenAI-compatible HTTP server on loopback, scripted like :mod:`scripted_model`.

The real provider client (``ChatOpenAI`` from our model factory, or the GNS3
server's own in a subprocess) talks to it over HTTP, so streaming, tool-call
parsing, retries and error mapping are exercised end to end::

    async with OpenAIStub(api_key="sk-test") as stub:
        stub.enqueue(
            reply(tool_calls=[tool_call("get_topology", {}), tool_call("list_templates", {})]),
            rate_limited(),
            "Both routers are up.",
        )
        model = create_chat_model({"model": "gpt-4o-mini", "base_url": stub.base_url,
                                   "api_key": "sk-test", "context_limit": 128})
        ...
        assert stub.requests[0]["messages"][-1]["content"] == "..."

``with OpenAIStub.in_thread() as stub`` runs the same server on its own event loop in
a background thread, for clients that live in another process or loop.

Script items: a string (a text reply), :func:`reply` (text and/or tool calls,
usage, an optional *hold* in the middle of the stream until :meth:`OpenAIStub.release`),
and faults: :func:`rate_limited` (429 with ``retry-after``), :func:`server_error`
(500), :func:`hang` (never answers; the client's timeout must fire; woken on stop),
:func:`context_length_exceeded` (400 in OpenAI's exact error shape) or any
:func:`fault`. Faults carry a tiny ``retry-after`` so client retries are fast:
nothing in the stub or its tests sleeps to synchronise.

:meth:`OpenAIStub.enqueue_for` scripts answers for the requests a predicate picks (say, the
copilot's summary calls, which run beside its chat calls), ahead of the main script.

The copilot's probes of how a server renders tool results (``agent/server/tool_results.py``)
are answered by the stub itself, without using the script, and kept in ``probes``
rather than ``requests``; ``drops_tool_results=True`` makes it count them as
llama-cpp-python's ``chatml-function-calling`` template renders them (no tool results).

When the script runs out the stub answers 400 ``stub_script_exhausted`` (which
clients do not retry) and counts it in ``unscripted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from gns3server.agent.gns3_copilot.agent.server.tool_results import is_template_probe
from gns3server.agent.gns3_copilot.agent.server.tools_cost import is_tools_probe
from tests.support.loopback import serve_on_loopback

__all__ = [
    "OpenAIStub",
    "StubFault",
    "StubReply",
    "StubRequest",
    "StubToolCall",
    "context_length_exceeded",
    "cut_stream",
    "empty_stream",
    "fault",
    "hang",
    "rate_limited",
    "reply",
    "server_error",
    "tool_call",
]

FAST_RETRY_AFTER = 0.01
"""Seconds a scripted fault asks the client to wait before retrying (OpenAI's client honours it)."""
STATE_DEADLINE = 60.0
"""How long a test waits for the copilot to reach the stub: generous, CI machines are busy."""


@dataclass(frozen=True)
class StubToolCall:
    name: str
    arguments: Mapping[str, Any] | str
    id: str | None = None


@dataclass(frozen=True)
class StubReply:
    """A successful completion: text, tool calls, usage, and how to stream it."""

    text: str = ""
    tool_calls: Sequence[StubToolCall] = ()
    usage: tuple[int, int] | None = None
    """(prompt_tokens, completion_tokens); estimated from the request when None."""
    chunk_chars: int = 4
    hold_after: int | None = None
    """Streamed chunks to send before waiting for :meth:`OpenAIStub.release` (None: no hold)."""
    finish_reason: str | None = None
    cut_after: int | None = None
    """Streamed only: close the body after this many deltas, with no finish reason and no
    ``[DONE]`` (0: an empty 200 body, as llama-cpp-python sends for a tool call it cannot stream)."""


@dataclass(frozen=True)
class StubFault:
    """An HTTP error answer, or a request that is never answered (``hang``)."""

    status: int = 500
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass(frozen=True)
class StubRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


ScriptItem = StubReply | StubFault | str


# ---------------------------------------------------------------- script items


def tool_call(name: str, arguments: Mapping[str, Any] | str, id: str | None = None) -> StubToolCall:
    """One function call; ``arguments`` as a dict (JSON-encoded) or a raw string (even invalid JSON)."""
    return StubToolCall(name, arguments, id)


def reply(
    text: str = "",
    *,
    tool_calls: Sequence[StubToolCall] = (),
    usage: tuple[int, int] | None = None,
    chunk_chars: int = 4,
    hold_after: int | None = None,
    finish_reason: str | None = None,
) -> StubReply:
    """A completion; streamed as ``chunk_chars``-sized text deltas, then tool-call deltas."""
    return StubReply(text, tuple(tool_calls), usage, chunk_chars, hold_after, finish_reason)


def empty_stream() -> StubReply:
    """A streamed request answered 200 with an empty body (a non-streamed one gets an empty reply)."""
    return StubReply(cut_after=0)


def cut_stream(text: str, after: int = 2, chunk_chars: int = 4) -> StubReply:
    """``text`` streamed, but the body ends after ``after`` deltas: no finish reason, no ``[DONE]``."""
    return StubReply(text, chunk_chars=chunk_chars, cut_after=after)


def _error_body(message: str, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _retry_headers(retry_after: float) -> dict[str, str]:
    return {"retry-after": str(max(1, math.ceil(retry_after))), "retry-after-ms": str(int(retry_after * 1000))}


def fault(
    status: int,
    message: str,
    *,
    type_: str = "server_error",
    code: str | None = None,
    retry_after: float | None = FAST_RETRY_AFTER,
) -> StubFault:
    """Any HTTP error in OpenAI's error shape."""
    headers = _retry_headers(retry_after) if retry_after is not None else {}
    return StubFault(status, _error_body(message, type_, code), headers)


def rate_limited(retry_after: float = FAST_RETRY_AFTER) -> StubFault:
    """429 as OpenAI sends it, with ``retry-after`` (seconds) and ``retry-after-ms``."""
    return fault(
        429,
        "Rate limit reached for requests. Please try again later.",
        type_="requests",
        code="rate_limit_exceeded",
        retry_after=retry_after,
    )


def server_error(message: str = "The server had an error while processing your request.") -> StubFault:
    """500; clients retry it (``max_retries``)."""
    return fault(500, message, type_="server_error", code=None)


def hang() -> StubFault:
    """Accept the request and never answer (until the stub stops): the client's timeout must act."""
    return StubFault(status=504, body=_error_body("stub stopped while hanging", "server_error", None), hang=True)


def context_length_exceeded(limit: int = 8192, requested: int = 12000) -> StubFault:
    """400 exactly as OpenAI rejects a prompt longer than the model's window."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{requested} tokens. Please reduce the length of the messages."
    )
    return StubFault(400, _error_body(message, "invalid_request_error", "context_length_exceeded", "messages"))


# ------------------------------------------------------------------- the stub


class OpenAIStub:
    """``POST /v1/chat/completions`` and ``GET /v1/models`` answering from a script."""

    def __init__(
        self, *, api_key: str | None = None, models: Sequence[str] = ("stub-model",), echo_key: bool = False,
        drops_tool_results: bool = False,
    ) -> None:
        self.api_key = api_key
        self.drops_tool_results = drops_tool_results
        """Count prompts as llama-cpp-python's ``chatml-function-calling`` template renders them: without
        tool results. Only the copilot's template probes are answered from this (they use no script)."""
        self.probes: list[dict[str, Any]] = []
        """The copilot's probes of how tool results are rendered (agent/server/tool_results.py), kept out of ``requests``."""
        self.tools_probes: list[dict[str, Any]] = []
        """Its measures of what the tool definitions cost (agent/server/tools_cost.py), likewise."""
        self.echo_key = echo_key
        """A wrong key is quoted whole in the 401 ("Incorrect API key provided: <key>"), as a careless
        provider might: what the copilot must never pass on to a log, a stream or storage."""
        self.models = tuple(models)
        self.requests: list[dict[str, Any]] = []
        """JSON body of every chat completion request, in arrival order."""
        self.received: list[StubRequest] = []
        """Every request (any path), with its headers."""
        self.unscripted = 0
        self._script: deque[ScriptItem] = deque()
        self._routed: list[tuple[Callable[[Mapping[str, Any]], bool], deque[ScriptItem]]] = []
        self._lock = threading.Lock()  # the script and records are shared with the test's thread
        self.disconnects = 0
        """Chat completion requests whose client went away before the answer was complete."""
        # (what is counted: "requests" or "disconnects", the count awaited, the waiter's loop, its future)
        self._waiters: list[tuple[str, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._ids = itertools.count(1)
        self._holds = 0
        self._released = 0.0
        self._release_changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    # ------------------------------------------------------------- scripting

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what a client's ``base_url`` should be."""
        if self.port is None:
            raise RuntimeError("OpenAIStub is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *items: ScriptItem) -> None:
        """Append answers to the script (thread-safe)."""
        for item in items:
            if not isinstance(item, (StubReply, StubFault, str)):
                raise TypeError(f"cannot script a {type(item).__name__}")
        with self._lock:
            self._script.extend(items)

    def enqueue_for(self, match: Callable[[Mapping[str, Any]], bool], *items: ScriptItem) -> None:
        """Answers for the requests whose JSON body ``match`` accepts, before the main script
        (for requests a client sends concurrently, whose order of arrival is not fixed)."""
        for item in items:
            if not isinstance(item, (StubReply, StubFault, str)):
                raise TypeError(f"cannot script a {type(item).__name__}")
        with self._lock:
            self._routed.append((match, deque(items)))

    @property
    def pending(self) -> int:
        """Scripted answers not consumed yet."""
        with self._lock:
            return len(self._script)

    def release(self, count: int = 1) -> None:
        """Let the next ``count`` held replies finish (also those not held yet); thread-safe."""
        self._call_in_loop(self._bump_release, float(count))

    async def wait_for_requests(self, count: int, timeout: float = STATE_DEADLINE) -> None:
        """Wait (from any loop) until ``count`` chat completion requests have arrived."""
        await self._wait_for("requests", count, timeout)

    async def wait_for_disconnects(self, count: int, timeout: float = STATE_DEADLINE) -> None:
        """Wait (from any loop) until ``count`` clients have left a chat completion before its end
        (how a test sees that the server under test cancelled its call to the LLM)."""
        await self._wait_for("disconnects", count, timeout)

    def _counts(self) -> dict[str, int]:
        return {"requests": len(self.requests), "disconnects": self.disconnects}

    async def _wait_for(self, kind: str, count: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._counts()[kind] >= count:
                return
            self._waiters.append((kind, count, loop, future))
        await asyncio.wait_for(future, timeout)

    def _counted(self) -> None:
        """Wake the waiters whose count is reached."""
        with self._lock:
            counts = self._counts()
            ready = [(loop, fut) for kind, n, loop, fut in self._waiters if n <= counts[kind]]
            self._waiters = [w for w in self._waiters if w[1] > counts[w[0]]]
        for loop, fut in ready:
            loop.call_soon_threadsafe(_resolve, fut)

    # ----------------------------------------------------------- lifecycle

    async def start(self) -> OpenAIStub:
        """Listen on a free loopback port in the running loop."""
        self._loop = asyncio.get_running_loop()
        self._release_changed = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._list_models)
        # Handlers are cancelled when their client disconnects: that is how a held reply
        # learns that the server under test gave up on it (counted in `disconnects`).
        self._runner, self.port = await serve_on_loopback(app, shutdown_timeout=5.0, handler_cancellation=True)
        return self

    async def stop(self) -> None:
        """Wake every hung or held request, then shut the server down."""
        self._bump_release(math.inf)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @classmethod
    @contextlib.contextmanager
    def in_thread(cls, **kwargs: Any) -> Iterator[OpenAIStub]:
        """Run a stub on its own loop in a daemon thread (for clients outside the test's loop)."""
        stub = cls(**kwargs)
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(stub.start())
            except BaseException as exc:  # noqa: BLE001  # reported to the caller's thread below
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()

        thread = threading.Thread(target=run, name="openai-stub", daemon=True)
        thread.start()
        started.wait()
        try:
            if failure:
                raise RuntimeError("OpenAIStub failed to start") from failure[0]
            yield stub
        finally:
            if not failure:
                asyncio.run_coroutine_threadsafe(stub.stop(), loop).result(timeout=30)
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()

    # --------------------------------------------------------------- internals

    def _call_in_loop(self, func: Any, *args: Any) -> None:
        if self._loop is None:
            raise RuntimeError("OpenAIStub is not running")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            func(*args)
        else:
            self._loop.call_soon_threadsafe(func, *args)

    def _bump_release(self, count: float) -> None:
        assert self._release_changed is not None
        self._released += count
        self._release_changed.set()
        self._release_changed = asyncio.Event()

    async def _wait_released(self, ordinal: float) -> None:
        while self._released < ordinal:
            assert self._release_changed is not None
            await self._release_changed.wait()

    def _record(self, request: web.Request, body: Any) -> None:
        record = StubRequest(request.method, request.path, dict(request.headers), body)
        with self._lock:
            self.received.append(record)
            if request.path.endswith("/chat/completions"):
                self.requests.append(body)
        self._counted()

    def _unauthorised(self, request: web.Request) -> web.Response | None:
        authorization = request.headers.get("Authorization", "")
        if self.api_key is None or authorization == f"Bearer {self.api_key}":
            return None
        quoted = f": {authorization.removeprefix('Bearer ')}" if self.echo_key else ""
        return web.json_response(
            _error_body(f"Incorrect API key provided{quoted}.", "invalid_request_error", "invalid_api_key"), status=401
        )

    async def _list_models(self, request: web.Request) -> web.Response:
        self._record(request, None)
        denied = self._unauthorised(request)
        if denied is not None:
            return denied
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "openai-stub"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._answer(request)
        except asyncio.CancelledError:
            self._client_left()
            raise

    def _client_left(self) -> None:
        with self._lock:
            self.disconnects += 1
        self._counted()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        if is_tools_probe(body):
            with self._lock:
                self.tools_probes.append(body)
            return self._unauthorised(request) or self._answer_probe(body)
        if is_template_probe(body):
            with self._lock:
                self.probes.append(body)
            return self._unauthorised(request) or self._answer_probe(body)
        self._record(request, body)
        denied = self._unauthorised(request)
        if denied is not None:
            return denied
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return web.json_response(
                _error_body("'messages' is a required property", "invalid_request_error", None, "messages"),
                status=400,
            )
        with self._lock:
            routed = next((queue for match, queue in self._routed if queue and match(body)), None)
            item = routed.popleft() if routed else self._script.popleft() if self._script else None
            if item is None:
                self.unscripted += 1
            request_number = len(self.requests)
        if item is None:
            text = f"OpenAIStub: no scripted response left for request #{request_number}; enqueue() more"
            return web.json_response(_error_body(text, "invalid_request_error", "stub_script_exhausted"), status=400)
        if isinstance(item, StubFault):
            if item.hang:
                await self._wait_released(math.inf)  # only stop() gets here
            return web.json_response(dict(item.body), status=item.status, headers=dict(item.headers))
        if isinstance(item, str):
            item = reply(item)
        if item.hold_after is not None and not body.get("stream"):  # unstreamed: held before answering
            self._holds += 1
            await self._wait_released(self._holds)
        number = next(self._ids)
        completion_id = f"chatcmpl-stub{number}"
        calls = [(c.id or f"call_{number}_{i}", c) for i, c in enumerate(item.tool_calls)]
        usage = _usage(item, body)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, body, item, completion_id, calls, usage if include_usage else None)
        message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": _arguments(c)}}
                for cid, c in calls
            ]
        return web.json_response(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "stub-model"),
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(item)}],
                "usage": usage,
            }
        )

    def _answer_probe(self, body: Mapping[str, Any]) -> web.Response:
        """A 1-token answer whose prompt count leaves tool results out when the stub plays a server that drops them."""
        kept = [m for m in body["messages"] if not (self.drops_tool_results and m.get("role") == "tool")]
        prompt = max(1, len(json.dumps(kept) + json.dumps(body.get("tools") or [])) // 4)
        message = {"role": "assistant", "content": "x"}
        return web.json_response({
            "id": "chatcmpl-probe", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub-model"),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1},
        })

    async def _stream(
        self,
        request: web.Request,
        body: Mapping[str, Any],
        item: StubReply,
        completion_id: str,
        calls: list[tuple[str, StubToolCall]],
        usage: dict[str, int] | None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "stub-model"),
        }
        if usage is not None:
            base["usage"] = None

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        events = list(_deltas(item, calls))
        events[0] = {"role": "assistant", **events[0]}
        payloads = [chunk(delta) for delta in events] + [chunk({}, _finish_reason(item))]
        if usage is not None:
            payloads.append({**base, "choices": [], "usage": usage})
        if item.cut_after is not None:
            for payload in payloads[: min(item.cut_after, len(events))]:
                await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            await response.write_eof()
            return response
        hold_ordinal = None
        if item.hold_after is not None:
            self._holds += 1
            hold_ordinal = self._holds
        try:
            for index, payload in enumerate(payloads):
                if hold_ordinal is not None and index == item.hold_after:
                    await self._wait_released(hold_ordinal)
                await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:  # the client gave up while we wrote (timeout, abort)
            self._client_left()
        return response


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _arguments(call: StubToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _finish_reason(item: StubReply) -> str:
    return item.finish_reason or ("tool_calls" if item.tool_calls else "stop")


def _deltas(item: StubReply, calls: list[tuple[str, StubToolCall]]) -> Iterator[dict[str, Any]]:
    """The ``delta`` objects OpenAI streams: text pieces, then per call its header and argument pieces."""
    step = max(1, item.chunk_chars)
    if not item.text and not calls:
        yield {"content": ""}
    for start in range(0, len(item.text), step):
        yield {"content": item.text[start : start + step]}
    for index, (call_id, call) in enumerate(calls):
        yield {
            "tool_calls": [
                {"index": index, "id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            ]
        }
        arguments = _arguments(call)
        for start in range(0, len(arguments), step):
            yield {"tool_calls": [{"index": index, "function": {"arguments": arguments[start : start + step]}}]}


def _usage(item: StubReply, body: Mapping[str, Any]) -> dict[str, int]:
    if item.usage is not None:
        prompt, completion = item.usage
    else:  # a plausible estimate (~4 characters a token) when the test does not care
        prompt = max(1, len(json.dumps(body.get("messages", []))) // 4)
        completion = max(1, (len(item.text) + sum(len(_arguments(c)) for c in item.tool_calls)) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
