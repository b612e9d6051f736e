"""A run's queue as its client reads it: waiting text joined, nothing lost, reordered or held back."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gns3server.agent.gns3_copilot.agent import events
from gns3server.agent.gns3_copilot.service.run_queue import RunQueueReader


def queued(*items: dict[str, Any]) -> asyncio.Queue[dict[str, Any]]:
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    return queue


async def read_all(reader: RunQueueReader) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["type"] != "done":
        event = await reader.next(30)
        assert event is not None
        seen.append(event)
    return seen


async def test_text_that_piled_up_is_one_event_and_the_next_event_follows_it() -> None:
    call = events.tool_call("c1", "gns3_topology", {})
    queue = queued(events.content("OSPF "), events.content("is "), events.content("Full"), call,
                   events.content("."), events.done("s1", {}, "completed"))
    seen = await read_all(RunQueueReader(queue))
    assert seen == [events.content("OSPF is Full"), call, events.content("."), events.done("s1", {}, "completed")]


async def test_text_is_never_held_back_for_more_to_come() -> None:
    queue = queued(events.content("first"))
    reader = RunQueueReader(queue)
    assert await reader.next(30) == events.content("first")  # returned at once: nothing else queued
    waiting = asyncio.create_task(reader.next(30))
    await asyncio.sleep(0)  # let it reach the queue's wait (not a synchronisation: the result is checked)
    queue.put_nowait(events.content("second"))
    assert await asyncio.wait_for(waiting, 30) == events.content("second")


async def test_an_empty_queue_gives_none_for_the_heartbeat_and_a_cancelled_wait_loses_nothing() -> None:
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    reader = RunQueueReader(queue)
    assert await reader.next(0.01) is None
    waiting = asyncio.create_task(reader.next(30))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    queue.put_nowait(events.content("kept"))
    assert await reader.next(30) == events.content("kept")


kinds = st.one_of(st.text(max_size=6).map(events.content), st.sampled_from(["context", "tool_call", "evidence"]).map(
    lambda kind: {"type": kind}))


@given(st.lists(kinds, max_size=30))
def test_any_run_reads_as_the_same_text_between_the_same_other_events(items: list[dict[str, Any]]) -> None:
    def shape(seq: list[dict[str, Any]]) -> list[Any]:
        """Each run of content events as its text, the other events as they are."""
        out: list[Any] = []
        for event in seq:
            if event["type"] == "content" and out and isinstance(out[-1], str):
                out[-1] += event["content"]
            else:
                out.append(event["content"] if event["type"] == "content" else event)
        return out

    stream = [*items, events.done("s1", {}, "completed")]
    seen = asyncio.run(read_all(RunQueueReader(queued(*stream))))
    assert shape(seen) == shape(stream)
    assert all(a["type"] != "content" or b["type"] != "content" for a, b in itertools.pairwise(seen))  # joined
