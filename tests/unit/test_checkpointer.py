"""The threaded checkpointer: same behaviour as the saver it wraps, work off the loop."""

from __future__ import annotations

import threading

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from gns3server.agent.gns3_copilot.service.checkpointer import ThreadedCheckpointer


class RecordingSaver(InMemorySaver):
    """Notes the thread of every write and read."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def put(self, *args, **kwargs):
        self.threads.add(threading.get_ident())
        return super().put(*args, **kwargs)

    def get_tuple(self, config):
        self.threads.add(threading.get_ident())
        return super().get_tuple(config)


def graph(checkpointer):
    builder = StateGraph(MessagesState)
    builder.add_node("answer", lambda state: {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]})
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=checkpointer)


async def test_graph_runs_and_persists_through_worker_threads():
    inner = RecordingSaver()
    saver = ThreadedCheckpointer(inner)
    app = graph(saver)
    config = {"configurable": {"thread_id": "t"}}
    await app.ainvoke({"messages": [HumanMessage("one")]}, config)
    await app.ainvoke({"messages": [HumanMessage("two")]}, config)
    state = await app.aget_state(config)
    assert [m.content for m in state.values["messages"]] == ["one", "echo one", "two", "echo two"]
    assert inner.threads and threading.get_ident() not in inner.threads
    history = [c async for c in saver.alist(config)]
    assert len(history) == len(list(inner.list(config))) > 2
    assert saver.get_tuple(config) == inner.get_tuple(config)
    await saver.adelete_thread("t")
    assert await saver.aget_tuple(config) is None


class DerivingSaver(InMemorySaver):
    def with_allowlist(self, extra_allowlist):
        return InMemorySaver()


def test_allowlist_clones_wrap_the_derived_saver():
    plain = ThreadedCheckpointer(InMemorySaver())
    assert plain.with_allowlist([("some.module", "Type")]) is plain  # nothing derived: same wrapper
    deriving = ThreadedCheckpointer(DerivingSaver())
    derived = deriving.with_allowlist([("some.module", "Type")])
    assert isinstance(derived, ThreadedCheckpointer) and type(derived.saver) is InMemorySaver
    assert derived.serde is derived.saver.serde
