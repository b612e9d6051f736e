"""A project's topology kept between turns, forgotten on GNS3's own notifications (``kept_topology.py``).

GNS3's real notification hub (``gns3server.controller.notification.Notification``) carries the
events, emitted as GNS3's controller emits them; the REST read and the host's RBAC are stand-ins
that count their calls. Nothing sleeps: an event reaches the listener at the loop's next turns,
so the tests wait on the state it changes (with a generous deadline).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from gns3server.controller.notification import Notification

from gns3server.agent.gns3_copilot.gns3_client.kept_topology import KeptTopologies, topology_checks

PROJECT = "5b9b7a4e-2f4c-4d5e-9c1a-0a1b2c3d4e5f"
OTHER = "6c0c8b5f-3a5d-4e6f-8d2b-1b2c3d4e5f60"
DEADLINE = 30.0


class Project:
    def __init__(self, auto_close: bool) -> None:
        self.auto_close = auto_close


class Controller:
    """What the kept topologies use of GNS3's controller: its projects and its notification hub (the real one)."""

    def __init__(self, **projects: Project) -> None:
        self.projects = dict(projects)
        self.notification = Notification(self)


class Client:
    def __init__(self, token: str | None = "token-alice") -> None:
        self.token = token


class Lab:
    """The REST read (each read sees the lab as it is now) and the RBAC answer, both counted."""

    def __init__(self) -> None:
        self.nodes = ["PC1"]
        self.reads: list[str] = []
        self.asked: list[tuple[str, list[tuple[str, str]]]] = []
        self.allowed = True
        self.during_read: Callable[[], None] | None = None

    async def read(self, client: Any, project_id: str) -> dict[str, Any]:
        self.reads.append(project_id)
        if self.during_read is not None:
            self.during_read()
            # As over REST, the answer is handled on a later turn of the loop than the event was emitted on.
            answered = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(answered.set_result, None)
            await answered
        return {"project_id": project_id, "name": "lab", "status": "opened",
                "nodes": [{"name": n} for n in self.nodes], "links": []}

    async def allows(self, token: str, checks: Any) -> bool:
        self.asked.append((token, list(checks)))
        return self.allowed


async def until(condition: Callable[[], bool]) -> None:
    """Let the loop run until ``condition`` holds (GNS3 hands events over with ``call_soon_threadsafe``)."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "the state never came"
        await asyncio.sleep(0)


def names(topology: dict[str, Any]) -> list[str]:
    return [n["name"] for n in topology["nodes"]]


@pytest.fixture
def lab() -> Lab:
    return Lab()


@pytest.fixture
async def kept(lab: Lab):
    controller = Controller(**{PROJECT: Project(auto_close=False), OTHER: Project(auto_close=False)})
    topologies = KeptTopologies(controller, lab.allows, read=lab.read)
    yield topologies, controller.notification
    await topologies.aclose()


async def test_a_topology_is_read_once_until_gns3_says_the_project_changed(kept, lab):
    topologies, notification = kept
    first = await topologies.read(Client(), PROJECT)
    lab.nodes.append("PC2")  # not announced yet: the kept one is given
    assert await topologies.read(Client(), PROJECT) == first and lab.reads == [PROJECT]
    notification.project_emit("ping", {"cpu_usage_percent": 1})  # a compute's ping changes nothing
    notification.project_emit("node.created", {"project_id": PROJECT, "name": "PC2"})
    await until(lambda: not topologies.holds(PROJECT))
    assert names(await topologies.read(Client(), PROJECT)) == ["PC1", "PC2"] and lab.reads == [PROJECT] * 2
    assert topologies.holds(PROJECT)


@pytest.mark.parametrize("action", ["node.updated", "node.deleted", "link.created", "link.updated", "link.deleted",
                                    "drawing.updated", "snapshot.restored"])
async def test_every_event_of_the_project_but_a_ping_forgets_it(kept, lab, action):
    topologies, notification = kept
    await topologies.read(Client(), PROJECT)
    await topologies.read(Client(), OTHER)
    notification.project_emit(action, {"project_id": PROJECT})
    await until(lambda: not topologies.holds(PROJECT))
    assert topologies.holds(OTHER)  # another project's topology stays


@pytest.mark.parametrize("action", ["project.updated", "project.closed", "project.opened", "project.deleted"])
async def test_the_controllers_project_events_forget_that_project(kept, lab, action):
    topologies, notification = kept
    await topologies.read(Client(), PROJECT)
    await topologies.read(Client(), OTHER)
    notification.controller_emit(action, {"project_id": PROJECT, "name": "lab"})
    await until(lambda: not topologies.holds(PROJECT))
    assert topologies.holds(OTHER)


async def test_gns3s_rbac_is_asked_at_every_read_and_a_refusal_goes_to_gns3(kept, lab):
    topologies, _ = kept
    await topologies.read(Client("token-alice"), PROJECT)
    await topologies.read(Client("token-bob"), PROJECT)
    assert lab.asked == [("token-alice", topology_checks(PROJECT)), ("token-bob", topology_checks(PROJECT))]
    assert {privilege for privilege, _ in topology_checks(PROJECT)} == {"Project.Audit", "Node.Audit", "Link.Audit"}
    lab.allowed = False  # bob's access was taken away: his reads go to GNS3, which answers him (its 403)
    await topologies.read(Client("token-bob"), PROJECT)
    await topologies.read(Client("token-bob"), PROJECT)
    assert lab.reads == [PROJECT] * 3 and len(lab.asked) == 4


def token(expires: float) -> str:
    claims = base64.urlsafe_b64encode(json.dumps({"sub": "alice", "exp": expires}).encode()).decode().rstrip("=")
    return f"e30.{claims}.sig"


async def test_an_expired_token_or_none_goes_to_gns3(kept, lab):
    topologies, _ = kept
    await topologies.read(Client(token(time.time() + 3600)), PROJECT)
    await topologies.read(Client(token(time.time() - 1)), PROJECT)  # GNS3 3.0 would take it; the client refuses it
    await topologies.read(Client(None), PROJECT)
    assert lab.reads == [PROJECT] * 3 and len(lab.asked) == 1


async def test_a_project_gns3_does_not_have_goes_to_gns3(kept, lab):
    topologies, _ = kept
    unknown = "7d1d9c60-4b6e-4f70-9e3c-2c3d4e5f6071"
    await topologies.read(Client(), unknown)
    await topologies.read(Client(), unknown)
    assert lab.reads == [unknown] * 2 and not topologies.holds(unknown)


async def test_an_event_during_the_read_keeps_nothing(kept, lab):
    topologies, notification = kept
    lab.during_read = lambda: notification.project_emit("node.created", {"project_id": PROJECT})
    await topologies.read(Client(), PROJECT)
    await until(lambda: lab.reads == [PROJECT])
    lab.during_read = None
    await topologies.read(Client(), PROJECT)
    assert lab.reads == [PROJECT] * 2


async def test_a_tool_of_the_copilots_forgets_it_at_once(kept, lab):
    topologies, _ = kept
    await topologies.read(Client(), PROJECT)
    lab.nodes.append("PC2")
    topologies.forget(PROJECT)
    assert names(await topologies.read(Client(), PROJECT)) == ["PC1", "PC2"]


async def test_a_reader_cannot_change_what_the_next_one_gets(kept, lab):
    topologies, _ = kept
    (await topologies.read(Client(), PROJECT))["nodes"].append({"name": "mine"})
    (await topologies.read(Client(), PROJECT))["nodes"][0]["name"] = "renamed"
    assert names(await topologies.read(Client(), PROJECT)) == ["PC1"]


async def test_the_projects_kept_are_bounded_and_each_one_dropped_stops_listening(lab):
    controller = Controller(**{PROJECT: Project(auto_close=False), OTHER: Project(auto_close=False)})
    topologies = KeptTopologies(controller, lab.allows, read=lab.read, size=1)
    try:
        await topologies.read(Client(), PROJECT)
        await topologies.read(Client(), OTHER)
        assert not topologies.holds(PROJECT) and topologies.holds(OTHER)
        await until(lambda: not controller.notification.project_has_listeners(PROJECT))
    finally:
        await topologies.aclose()
    await until(lambda: not controller.notification.project_has_listeners(OTHER))


async def test_an_auto_closing_project_nobody_else_listens_to_is_not_listened_to(lab):
    """GNS3 closes such a project when its last notification client leaves: a listener of ours would keep it open."""
    controller = Controller(**{PROJECT: Project(auto_close=True)})
    topologies = KeptTopologies(controller, lab.allows, read=lab.read)
    try:
        await topologies.read(Client(), PROJECT)
        await topologies.read(Client(), PROJECT)
        assert lab.reads == [PROJECT] * 2 and not controller.notification.project_has_listeners(PROJECT)
    finally:
        await topologies.aclose()


async def test_on_an_auto_closing_project_it_listens_while_someone_else_does_and_leaves_once_alone(lab):
    controller = Controller(**{PROJECT: Project(auto_close=True)})
    topologies = KeptTopologies(controller, lab.allows, read=lab.read, leave_seconds=0.05)
    try:
        with controller.notification.project_queue(PROJECT):  # GNS3's web UI, open on the project
            await topologies.read(Client(), PROJECT)
            await topologies.read(Client(), PROJECT)
            assert lab.reads == [PROJECT] and topologies.holds(PROJECT)
        # The web UI left: GNS3 looks 5 s later whether anyone still listens; ours must be gone by then.
        await until(lambda: not controller.notification.project_has_listeners(PROJECT))
        assert not topologies.holds(PROJECT)
        await topologies.read(Client(), PROJECT)
        assert lab.reads == [PROJECT] * 2
    finally:
        await topologies.aclose()
