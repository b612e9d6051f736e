"""A chat completion request as the bytes it is sent as, and its streamed answer as the JSON it came as.

Three costs of every model call that the OpenAI SDK and ``langchain-openai`` add to plain JSON:

* **The body.** The SDK encodes the whole body (``json.dumps``) for every call: a long
  conversation's messages are encoded again each time (0.8-10 ms a call at 500 turns, growing).
  A message object's JSON does not change, so :class:`EncodedMessages` carries each message's
  encoding beside its dict (kept with the message object, ``openai_payload.py``), and the body
  is joined from them: the same JSON as the SDK's encoding of the same arguments (the same
  ``json.dumps`` settings, key for key), sent as the request's ``content``.
* **The chunks.** For every chunk of a streamed answer the SDK built a ``ChatCompletionChunk``
  (``construct_type`` walking the pydantic model and its nested choices, deltas and tool calls),
  which ``langchain-openai`` turned straight back into a dict (``model_dump``): about half of a
  streamed call's CPU, ~100 µs a chunk. The stream is read as ``AsyncStream[object]``, which
  yields each event's decoded JSON as it is, through the SDK's own SSE decoder, ``[DONE]``,
  ``error`` events and connection and timeout errors. ``langchain-openai`` takes a dict chunk as
  it is (it calls ``model_dump`` only on what is not a dict): its message chunks and errors are
  the ones it made before.
* **The chunk timeout.** ``langchain-openai`` bounds the wait for each chunk with
  ``asyncio.wait_for``, which on Python 3.11 starts a task per chunk (~4% of a long session's
  server time in a sparse profile). The stream here bounds each wait itself (``asyncio.timeout``: a timer, no
  task) and raises ``langchain-openai``'s own :class:`StreamChunkTimeoutError` as it did;
  the model turns its own bound off (``openai_payload.py``).

The request goes through the SDK's client (``post``: its retries, timeouts, headers, key,
``base_url`` and the HTTP client the outbound policy allowed) with the options its ``create``
gives a chat completion; ``with_raw_response.create`` (``langchain-openai``'s unstreamed call)
is the SDK's own raw-response wrapper around it. Anything else (no messages in ``extra_body``,
a ``response_format``) goes through the SDK's ``create`` as before.

Imported only when a model is built (with ``openai``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from types import TracebackType
from typing import Any, Self

from langchain_openai import StreamChunkTimeoutError
from openai import AsyncStream
from openai._legacy_response import async_to_raw_response_wrapper
from openai.types.chat import ChatCompletion

log = logging.getLogger(__name__)

__all__ = ["DictChunkCompletions", "EncodedMessages", "TimedChunks", "encode_json"]

PATH = "/chat/completions"
# ``create``'s arguments that are request options, not body fields.
_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")


def encode_json(value: Any) -> bytes:
    """``value`` as the SDK encodes a request body (its ``openapi_dumps``: no ASCII escaping, compact).

    The encoder ``json.dumps`` sets up on every call is set up once (:func:`_json_encoder`):
    for a message's few hundred bytes, setting it up cost twice the encoding.
    """
    return "".join(_json_encoder()(value)).encode()


@functools.cache
def _json_encoder() -> Callable[[Any], Iterable[str]]:
    """What ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`` encodes
    with: the C encoder it makes (marking containers, so a circular one is a ValueError as there),
    or the encoder's own chunks where Python has no C encoder."""
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if c_make_encoder is None:
        return functools.partial(encoder.iterencode, _one_shot=True)
    options = (encoder.default, encode_basestring, None, ":", ",", False, False, False)
    return lambda value: c_make_encoder({}, *options)(value, 0)  # markers: one dict for each value


class EncodedMessages(list[Any]):
    """A request's message dicts with each one's JSON encoding beside it, in the same order."""

    def __init__(self, dicts: list[Any], fragments: list[bytes]) -> None:
        super().__init__(dicts)
        self.fragments = fragments


def request_body(params: Mapping[str, Any]) -> bytes | None:
    """The JSON body ``create(**params)`` would send, joined from the messages' own encodings
    (None when the messages are not :class:`EncodedMessages` in ``extra_body``)."""
    extra = params.get("extra_body")
    messages = extra.get("messages") if isinstance(extra, Mapping) else None
    if not isinstance(messages, EncodedMessages) or len(messages.fragments) != len(messages):
        return None
    fields = {key: value for key, value in params.items() if key not in _OPTIONS}
    fields.update(extra or {})
    try:
        parts = [encode_json(key) + b":" + (b"[" + b",".join(messages.fragments) + b"]" if key == "messages"
                                            else encode_json(value)) for key, value in fields.items()]
    except (TypeError, ValueError):  # not plain JSON: the SDK's encoder knows more types
        return None
    return b"{" + b",".join(parts) + b"}"


def _request_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The request options ``create`` gives a chat completion (its ``make_request_options``)."""
    options: dict[str, Any] = {"security": {"bearer_auth": True}}
    if params.get("extra_headers") is not None:
        options["headers"] = params["extra_headers"]
    if params.get("extra_query") is not None:
        options["params"] = params["extra_query"]
    if "timeout" in params:
        options["timeout"] = params["timeout"]
    return options


class TimedChunks:
    """A stream whose every chunk must come within ``timeout`` seconds (None or 0: no bound),
    else :class:`StreamChunkTimeoutError` as ``langchain-openai`` raises it."""

    def __init__(self, stream: Any, timeout: float | None, model_name: str | None) -> None:
        self._stream, self._timeout, self._model_name = stream, timeout, model_name

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stream.close()

    async def __aiter__(self) -> AsyncIterator[Any]:
        chunks = self._stream.__aiter__()
        if not self._timeout or self._timeout <= 0:
            async for chunk in chunks:
                yield chunk
            return
        received = 0
        while True:
            try:
                async with asyncio.timeout(self._timeout):
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                log.warning("No chunk of the model's streamed answer for %.1f s (%d received)", self._timeout, received)
                raise StreamChunkTimeoutError(self._timeout, model_name=self._model_name,
                                              chunks_received=received) from exc
            received += 1
            yield chunk


class DictChunkCompletions:
    """An SDK client's ``chat.completions`` whose ``create`` sends the joined body and streams dicts,
    each chunk within ``chunk_timeout`` seconds.

    Everything else (``with_raw_response``, ``parse``, ...) is the wrapped resource's own.
    """

    def __init__(self, completions: Any, client: Any, chunk_timeout: float | None = None,
                 model_name: str | None = None) -> None:
        self._completions = completions
        self._client = client
        self.chunk_timeout = chunk_timeout
        self._model_name = model_name

    @property
    def wrapped(self) -> Any:
        """The SDK's own ``chat.completions`` resource."""
        return self._completions

    async def create(self, **params: Any) -> Any:
        """The SDK's answer: a ``ChatCompletion``, or the stream (:class:`TimedChunks` of dicts)."""
        answer = await self._send(**params)
        if isinstance(answer, AsyncStream):
            return TimedChunks(answer, self.chunk_timeout, self._model_name)
        return answer

    async def _send(self, **params: Any) -> Any:
        stream = bool(params.get("stream"))
        body = None if "response_format" in params else request_body(params)
        if body is not None:
            return await self._client.post(PATH, cast_to=ChatCompletion, content=body,
                                           options=_request_options(params), stream=stream,
                                           stream_cls=AsyncStream[object])
        if not stream:
            return await self._completions.create(**params)
        raw = await self._completions.with_raw_response.create(**params)
        return raw.parse(to=AsyncStream[object])

    @property
    def with_raw_response(self) -> _RawResponses:
        return _RawResponses(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)


class _RawResponses:
    """``with_raw_response`` of :class:`DictChunkCompletions`: ``create`` answers the SDK's raw
    response object (the SDK's own wrapper asks its client for it), the rest is the SDK's."""

    def __init__(self, completions: DictChunkCompletions) -> None:
        self.create = async_to_raw_response_wrapper(completions._send)
        self._sdk = completions.wrapped.with_raw_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sdk, name)
