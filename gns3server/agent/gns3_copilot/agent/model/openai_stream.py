"""Streamed chat completions read as the JSON the server sent: no SDK object per chunk.

For every chunk of a streamed answer the OpenAI SDK built a ``ChatCompletionChunk``
(``construct_type`` walking the pydantic model and its nested choices, deltas and tool
calls), which ``langchain-openai`` turned straight back into a dict (``model_dump``) to
build its message chunk from: about half of a streamed call's CPU, ~100 µs a chunk, a
few hundred chunks an answer.

The SDK's documented ``with_raw_response`` and ``parse(to=...)`` give the same stream as
``AsyncStream[object]``, which yields each event's decoded JSON as it is: the same request
(client, retries, timeouts, headers, ``base_url``, the HTTP client the outbound policy
allowed), the same SSE decoder, ``[DONE]``, ``error`` events and connection and timeout
errors, only no model built. ``langchain-openai`` takes a dict chunk as it is (it calls
``model_dump`` only on what is not a dict), so its message chunks, errors and chunk
timeout are the ones it made before.

Imported only when a model is built (with ``openai``).
"""

from __future__ import annotations

from typing import Any

from openai import AsyncStream

__all__ = ["DictChunkCompletions"]


class DictChunkCompletions:
    """An SDK client's ``chat.completions`` whose streamed ``create`` yields each chunk as a dict.

    Everything else (an unstreamed ``create``, ``with_raw_response``, ``parse``, ...) is the
    wrapped resource's own.
    """

    def __init__(self, completions: Any) -> None:
        self._completions = completions

    @property
    def wrapped(self) -> Any:
        """The SDK's own ``chat.completions`` resource."""
        return self._completions

    async def create(self, **params: Any) -> Any:
        if not params.get("stream"):
            return await self._completions.create(**params)
        raw = await self._completions.with_raw_response.create(**params)
        return raw.parse(to=AsyncStream[object])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)
