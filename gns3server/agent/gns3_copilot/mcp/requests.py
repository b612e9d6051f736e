"""What an MCP request body must be before the SDK sees it, and how a refusal is said.

The SDK's streamable-HTTP transport answers a body that is not JSON with a
JSON-RPC parse error, but only for ``json.JSONDecodeError``: a body that is not
valid UTF-8 (``UnicodeDecodeError``) or that nests deeply enough to exhaust the
parser's recursion (``RecursionError``) fell through to its catch-all, a 500
with a traceback in the log. :func:`body_problem` checks the body first, so such
a body gets what any malformed JSON gets: a JSON-RPC parse error with HTTP 400.
It also refuses JSON nested deeper than :data:`MAX_DEPTH` (no MCP message comes
near it; handlers that walk a value recursively must not meet one that deep)
and text that is not valid UTF-8 inside the JSON (a lone surrogate: it could
not be stored in the audit, nor sent back), as invalid params naming where.

Every refusal of the MCP endpoint (these, the body-size limit, the session
limits of :mod:`.admission`) is a JSON-RPC error object in the shape the SDK
gives its own (``id`` ``"server-error"`` when the request's id is not known), so
an MCP client can show it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp.types import INVALID_PARAMS, PARSE_ERROR
from starlette.types import Send

from ..utf8 import NOT_UTF8, first_unencodable

__all__ = ["MAX_DEPTH", "Problem", "body_problem", "jsonrpc_error_body", "jsonrpc_reply"]

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in an MCP message."""
UNKNOWN_ID = "server-error"  # the SDK's own id for errors not tied to a request it could read


@dataclass(frozen=True)
class Problem:
    """Why a body is refused: a JSON-RPC error code and message, and the request's id if known."""

    code: int
    message: str
    request_id: str | int = UNKNOWN_ID


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays/objects nest deeper than ``limit`` in ``value`` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def body_problem(body: bytes) -> Problem | None:
    """Why the SDK must not be handed ``body``, or None when it may parse it itself."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Problem(PARSE_ERROR, f"Parse error: the body is not valid UTF-8 (byte {exc.start})")
    try:
        value = json.loads(text)
    except RecursionError:
        return Problem(PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_DEPTH} levels")
    except ValueError:
        return None  # plain malformed JSON: the SDK's own parse error says where
    if _depth_exceeds(value, MAX_DEPTH):
        return Problem(PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_DEPTH} levels")
    where = first_unencodable(value)
    if where is not None:
        request_id = value.get("id") if isinstance(value, dict) else None
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            request_id = UNKNOWN_ID
        return Problem(INVALID_PARAMS, f"Invalid params: {where or 'the message'} {NOT_UTF8}", request_id)
    return None


def jsonrpc_error_body(code: int, message: str, request_id: str | int = UNKNOWN_ID) -> bytes:
    """A JSON-RPC error object, as bytes."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}, ensure_ascii=False
    ).encode("utf-8")


async def jsonrpc_reply(
    send: Send, status: int, code: int, message: str, request_id: str | int = UNKNOWN_ID,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer an HTTP request with a JSON-RPC error object and ``status``."""
    body = jsonrpc_error_body(code, message, request_id)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
