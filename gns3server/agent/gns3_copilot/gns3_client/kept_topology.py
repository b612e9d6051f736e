"""Projects' topologies kept between turns, forgotten as soon as GNS3's own notifications say they changed.

Every model call shows the model the project's live topology: the project, its nodes
and its links as GNS3's REST API gives them to the user. Read over REST, that is three
requests to this same server per turn, each authenticated and RBAC-checked by GNS3,
then encoded and decoded as JSON. The copilot runs inside gns3-server, so GNS3's
controller tells it in-process of every change: :class:`KeptTopologies` keeps the
topology read last for each project, listens to the project's notification queue,
and forgets the topology at the first event other than a ping (a node or link created,
updated or deleted, a node started or stopped, a drawing moved ...) and at the
controller's events for the project (updated, opened, closed, deleted). The next read
goes to GNS3 again.

What it never skips:

* GNS3's RBAC, read afresh at every read: the reader's token is checked in-process by
  the host's own dependencies (``api/permissions.py``: the token decoded and its user
  read as GNS3's authentication does, then ``Project.Audit``, ``Node.Audit`` and
  ``Link.Audit`` on the paths of the three REST reads). Anything but "allowed", or an
  expired token, goes the REST way, where GNS3 answers exactly as before;
* GNS3's auto-close: a project with ``auto_close`` closes once its last notification
  client has left (GNS3 looks 5 s after a client leaves). A listener of ours counts as
  a client, so one is kept only while someone else listens to the project (GNS3's web
  UI does while a user has it open) or while the project does not close by itself;
  left alone, it leaves within :data:`LEAVE_SECONDS`, before GNS3 looks;
* changes the copilot's own tools make: a tool that may have changed the lab forgets
  the project's topology at once (:meth:`KeptTopologies.forget`), whatever the order in
  which GNS3's events arrive.

A kept topology is stored as JSON text and decoded for each reader: no reader can
change what the next one gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .client import GNS3Client, token_expiry
from .topology import fetch_rest_topology

log = logging.getLogger(__name__)

__all__ = ["KEPT_PROJECTS", "LEAVE_SECONDS", "KeptTopologies", "topology_checks"]

KEPT_PROJECTS = 64
"""Projects whose topology is kept (and listened to) at once; the least recently read goes first."""
LEAVE_SECONDS = 1.0
"""How soon a listener left alone on an auto-closing project leaves (GNS3 looks for clients 5 s after one leaves)."""

Checks = Sequence[tuple[str, str]]
Allows = Callable[[str, Checks], Awaitable[bool]]
"""(token, [(privilege, path), ...]) -> whether GNS3 lets that token's user through every one, now."""
ReadTopology = Callable[[GNS3Client, str], Awaitable[dict[str, Any]]]


def topology_checks(project_id: str) -> list[tuple[str, str]]:
    """The privileges GNS3's routes require for the three reads a topology is made of, on their paths."""
    return [("Project.Audit", f"/projects/{project_id}"), ("Node.Audit", f"/projects/{project_id}/nodes"),
            ("Link.Audit", f"/projects/{project_id}/links")]


def _listeners(notification: Any, project_id: str) -> int | None:
    """How many clients listen to the project's notifications (GNS3 has no public count: None if unknown)."""
    listeners = getattr(notification, "_project_listeners", None)
    if not isinstance(listeners, dict):
        return None
    return len(listeners.get(project_id) or ())


@dataclass(eq=False)
class _Kept:
    """One project's kept topology, and the task that listens to the project for it."""

    snapshot: str | None = None  # the REST topology as JSON text (None: forgotten, read it again)
    generation: int = 0  # bumped by every event: a read that saw it change keeps nothing
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def forget(self) -> None:
        self.snapshot = None
        self.generation += 1


class KeptTopologies:
    """Each project's REST topology, kept while GNS3's notification queues say nothing changed.

    ``controller``: GNS3's controller (its ``notification`` hub and its ``projects`` by id);
    ``allows``: the host's RBAC for a token (see the module's docstring); ``read``: the
    REST read it stands for.
    """

    def __init__(
        self, controller: Any, allows: Allows, *, read: ReadTopology = fetch_rest_topology,
        size: int = KEPT_PROJECTS, leave_seconds: float = LEAVE_SECONDS,
    ) -> None:
        self._controller = controller
        self._notification = controller.notification
        self._allows = allows
        self._read = read
        self._size = size
        self._leave_seconds = leave_seconds
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._projects_task: asyncio.Task[None] | None = None
        self._closed = False

    def holds(self, project_id: str) -> bool:
        """A topology of the project is kept now (the next read needs no REST)."""
        kept = self._kept.get(project_id)
        return kept is not None and kept.snapshot is not None

    async def read(self, client: GNS3Client, project_id: str) -> dict[str, Any]:
        """The project's topology as ``client``'s user may read it: the kept one when GNS3 allows
        the user and nothing changed since, else read over REST (and kept, when it can be)."""
        token = client.token
        if token is None or not self._usable(token, project_id) or not await self._allows(token, topology_checks(project_id)):
            return await self._read(client, project_id)  # GNS3 answers as it would have (its error)
        kept = self._kept.get(project_id)
        if kept is not None and kept.snapshot is not None:
            self._kept.move_to_end(project_id)
            topology: dict[str, Any] = json.loads(kept.snapshot)
            return topology
        if kept is None:
            kept = self._watch(project_id)
        if kept is None:  # no listener may be kept on it now
            return await self._read(client, project_id)
        generation = kept.generation
        topology = await self._read(client, project_id)
        if self._kept.get(project_id) is kept and kept.generation == generation:  # no event during the read
            kept.snapshot = json.dumps(topology)
        return topology

    def forget(self, project_id: str) -> None:
        """The project's lab may have changed (a tool of the copilot's changed it): read it again next time."""
        kept = self._kept.get(project_id)
        if kept is not None:
            kept.forget()

    async def aclose(self) -> None:
        """Stop listening (the server is stopping)."""
        self._closed = True
        tasks = [k.task for k in self._kept.values() if k.task is not None]
        if self._projects_task is not None:
            tasks.append(self._projects_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._kept.clear()

    # -- listening ------------------------------------------------------------------

    def _usable(self, token: str, project_id: str) -> bool:
        """A token GNS3 would act on (it does not check ``exp``: the copilot does) for a project it has."""
        expiry = token_expiry(token)
        if expiry is not None and expiry <= time.time():
            return False
        return project_id in self._controller.projects

    def _may_listen(self, project_id: str, ours: int) -> bool:
        """Whether a listener of ours may stay on the project (``ours``: ours among its listeners)."""
        project = self._controller.projects.get(project_id)
        if project is None:  # gone (deleted, or never there): GNS3 answers the REST read
            return False
        if not project.auto_close:
            return True
        listening = _listeners(self._notification, project_id)
        return listening is not None and listening - ours > 0

    def _watch(self, project_id: str) -> _Kept | None:
        """Start listening to the project (before its read: an event during the read keeps it from being kept)."""
        if self._closed or not self._may_listen(project_id, ours=0):
            return None
        self._listen_to_projects()
        kept = _Kept()
        subscription = self._notification.project_queue(project_id)

        def seen(action: str, _: Any) -> None:
            if action != "ping":  # a compute's ping (sent to every project) changes nothing
                kept.forget()

        queue = _on_delivery(subscription.__enter__(), seen)
        kept.task = asyncio.get_running_loop().create_task(self._listen(project_id, kept, queue))
        kept.task.add_done_callback(lambda _: subscription.__exit__(None, None, None))
        self._kept[project_id] = kept
        while len(self._kept) > self._size:
            _, oldest = self._kept.popitem(last=False)
            if oldest.task is not None:
                oldest.task.cancel()
        return kept

    async def _listen(self, project_id: str, kept: _Kept, queue: Any) -> None:
        """Take the project's events (each forgot the topology as it came); leave when alone on an auto-closing project."""
        try:
            while True:
                action = await _next(queue, self._leave_seconds)
                if action in (None, "ping") and not self._may_listen(project_id, ours=1):
                    return
        finally:
            if self._kept.get(project_id) is kept:
                del self._kept[project_id]

    def _listen_to_projects(self) -> None:
        """Listen (once) to the controller's events: a project updated, opened, closed or deleted is forgotten."""
        if self._projects_task is None or self._projects_task.done():
            subscription = self._notification.controller_queue()
            queue = _on_delivery(subscription.__enter__(), self._project_event)
            self._projects_task = asyncio.get_running_loop().create_task(_drain(queue))
            self._projects_task.add_done_callback(lambda _: subscription.__exit__(None, None, None))

    def _project_event(self, action: str, event: Any) -> None:
        project_id = event.get("project_id") if isinstance(event, dict) else None
        if action != "ping" and project_id is not None:
            with contextlib.suppress(KeyError):
                self._kept[str(project_id)].forget()


def _on_delivery(queue: Any, seen: Callable[[str, Any], object]) -> Any:
    """``queue`` (one GNS3 gave us) with ``seen(action, event)`` called as GNS3 delivers each event to it.

    GNS3 hands an event over with ``call_soon_threadsafe(queue.put_nowait, ...)`` when it emits
    it, so ``seen`` runs before anything the loop does after that emission (the REST answer that
    followed it, say), rather than whenever a task gets round to reading the queue.
    """
    deliver = queue.put_nowait

    def delivered(item: tuple[str, Any, Any]) -> None:
        seen(item[0], item[1])
        deliver(item)

    queue.put_nowait = delivered
    return queue


async def _next(queue: asyncio.Queue[Any], seconds: float) -> str | None:
    """The action of the next event GNS3 puts on ``queue``; None if none came within ``seconds``.

    Taken with ``asyncio.Queue``'s own ``get`` (GNS3's ``NotificationQueue.get`` makes up a ping
    instead, through ``wait_for``, which in Python 3.11 can swallow the cancellation of a stopping server).
    """
    try:
        async with asyncio.timeout(seconds):
            action, _, _ = await asyncio.Queue.get(queue)
    except TimeoutError:
        return None
    return str(action)


async def _drain(queue: asyncio.Queue[Any]) -> None:
    """Take what GNS3 puts on the queue (``_on_delivery`` has seen it), so that it never grows."""
    while True:
        await asyncio.Queue.get(queue)
