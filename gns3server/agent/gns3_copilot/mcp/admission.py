"""How much of the MCP endpoint one credential, and one user, may hold.

The SDK's session manager has one limit, global: 10,000 open sessions. Each
costs memory (about 70 kB) and stays until its client ends it or it has been
idle for 30 minutes, so one read-only key opening sessions in a loop reached
that limit in under two minutes, and from then on every other user, the
administrator included, was refused for half an hour. :class:`Admission` caps
what each one may hold, so that nobody can deny the endpoint to anybody else:

* open sessions per credential (:data:`SESSIONS_PER_CREDENTIAL`) and per GNS3
  user, all their keys and tokens together (:data:`SESSIONS_PER_USER`);
* requests in flight per session (:data:`REQUESTS_PER_SESSION`), which bounds
  what a session holds at once (each request its streams and its task); a
  ``DELETE``, which ends the session, is never refused.

A request that opens a session (one without ``Mcp-Session-Id``) takes a
:class:`Ticket` before it reaches the SDK; the SDK runs the session's server
task (:meth:`..server._Server.run`) in a task started from that request, which
inherits the ticket through :data:`OPENING` and holds it for as long as the
session lives. The ticket is given back when both the opening request and the
session (if one was established) are over: a refused ``initialize`` gives it
back at once, an idle session when the SDK ends it.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .auth import Caller

__all__ = [
    "OPENING", "REQUESTS_PER_SESSION", "SESSIONS_PER_CREDENTIAL", "SESSIONS_PER_USER", "Admission", "Ticket",
]

SESSIONS_PER_CREDENTIAL = 32
SESSIONS_PER_USER = 64
REQUESTS_PER_SESSION = 16


@dataclass(eq=False)
class Ticket:
    """One session's place, held by its opening request and by the session's server task."""

    credential: str
    user: str
    holders: int = field(default=0)


OPENING: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar("copilot_mcp_opening", default=None)
"""The ticket of the session being opened by the current request (inherited by its server task)."""


class Admission:
    """Open sessions per credential and per user, and requests in flight per session."""

    def __init__(
        self,
        per_credential: int = SESSIONS_PER_CREDENTIAL,
        per_user: int = SESSIONS_PER_USER,
        per_session: int = REQUESTS_PER_SESSION,
    ) -> None:
        self.per_credential = per_credential
        self.per_user = per_user
        self.per_session = per_session
        self._live: set[Ticket] = set()
        self._in_flight: Counter[tuple[str, str]] = Counter()

    def sessions(self, caller: Caller) -> tuple[int, int]:
        """Open sessions (and openings under way) of the caller's credential, and of their user."""
        mine = sum(t.credential == caller.credential_id for t in self._live)
        theirs = sum(t.user == caller.user_id for t in self._live)
        return mine, theirs

    def open(self, caller: Caller) -> Ticket | str:
        """A ticket for a new session of ``caller``, or why there is none (a message for the client).

        Nothing is awaited between the count and the ticket's first hold, so concurrent
        openings cannot all slip under the cap.
        """
        mine, theirs = self.sessions(caller)
        if mine >= self.per_credential:
            what = "this MCP key" if caller.key is not None else "this GNS3 token"
            return (f"Too many open MCP sessions for {what} ({self.per_credential}): end one (HTTP DELETE with its "
                    "Mcp-Session-Id) or wait until one has been idle for 30 minutes")
        if theirs >= self.per_user:
            return (f"Too many open MCP sessions for GNS3 user {caller.username} ({self.per_user}, all keys and "
                    "tokens together): end one, or wait until one has been idle for 30 minutes")
        ticket = Ticket(caller.credential_id, caller.user_id)
        self._take(ticket)
        return ticket

    def _take(self, ticket: Ticket) -> None:
        ticket.holders += 1
        self._live.add(ticket)

    def _give_back(self, ticket: Ticket) -> None:
        ticket.holders -= 1
        if ticket.holders <= 0:
            self._live.discard(ticket)

    @contextmanager
    def held(self, ticket: Ticket, *, taken: bool = False) -> Iterator[None]:
        """Hold ``ticket`` while inside (``taken``: :meth:`open` took this hold already)."""
        if not taken:
            self._take(ticket)
        try:
            yield
        finally:
            self._give_back(ticket)

    @contextmanager
    def request(self, caller: Caller, session_id: str) -> Iterator[bool]:
        """While inside, one more request of the session is in flight; yields False (and counts
        nothing) when the session already has :attr:`per_session` in flight."""
        key = (caller.credential_id, session_id)
        if self._in_flight[key] >= self.per_session:
            yield False
            return
        self._in_flight[key] += 1
        try:
            yield True
        finally:
            self._in_flight[key] -= 1
            if self._in_flight[key] <= 0:
                del self._in_flight[key]
