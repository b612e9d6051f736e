"""What a server's runs share instead of building it per run: a model per user, LLM config and offer;
the tool offer per toolset shape; the compiled graph. Each run still gets its own tools (bound to its
user's token) and nothing of one user's reaches another's."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gns3server.agent.gns3_copilot.agent import assembly as assembly_module
from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly, RunSpec


@tool
def read_lab(node: str) -> str:
    """Read one node of the lab."""
    return f"{node} is up"


read_lab.metadata = {"read_only": True}


@tool
def change_lab(node: str) -> str:
    """Start one node of the lab."""
    return f"{node} started"


class Built:
    """A bind_tools that records what it was asked to build and returns a new model each time."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, list[str]]] = []

    def __call__(self, tools: Any, config: Any) -> object:
        self.asked.append((config["api_key"], [t["function"]["name"] if isinstance(t, dict) else t.name for t in tools]))
        return object()


def agent(built: Built, tokens: list[str]) -> AgentAssembly:
    def tools_factory(context: Any) -> list[Any]:
        tokens.append(context.client_factory().token)
        return [read_lab, change_lab]

    class Client:
        def __init__(self, token: str) -> None:
            self.token = token

    return AgentAssembly(tools_factory=tools_factory, bind_tools=built, is_context_length_error=lambda exc: False,
                         client_factory=Client)


def spec(user: str, key: str, session: str, mode: str = "lab_automation", limit: int = 128) -> RunSpec:
    config = {"provider": "openai", "model": "gpt-4o-mini", "api_key": key, "context_limit": limit}
    return RunSpec(user, user, f"token-of-{user}", "p1", session, config, mode)


def bound(assembly: AgentAssembly, run: RunSpec) -> Any:
    settings = assembly.settings(run)
    return settings.bind_tools(settings.tools)


def test_a_users_runs_on_one_config_share_one_model_and_no_one_else_gets_it():
    """The model was built for every run (3.5 ms of CPU, most of it the SDK's environment check):
    one user's runs on one config and offer now share it; another user, another key or another
    offer gets a model of its own. Each run's tools are still built with its user's token."""
    built, tokens = Built(), []
    assembly = agent(built, tokens)
    first, second = bound(assembly, spec("u1", "k1", "s1")), bound(assembly, spec("u1", "k1", "s2"))
    assert first is second and built.asked == [("k1", ["read_lab", "change_lab"])]
    others = [bound(assembly, spec("u2", "k1", "s3")), bound(assembly, spec("u1", "k2", "s4")),
              bound(assembly, spec("u1", "k1", "s5", mode="teaching"))]
    assert len({id(m) for m in [first, *others]}) == 4
    assert built.asked[1:] == [("k1", ["read_lab", "change_lab"]), ("k2", ["read_lab", "change_lab"]),
                               ("k1", ["read_lab"])]
    assert tokens == ["token-of-u1", "token-of-u1", "token-of-u2", "token-of-u1", "token-of-u1"]


def test_the_tool_offer_is_chosen_once_per_shape(monkeypatch: pytest.MonkeyPatch):
    """Choosing the offer (converting every tool, the compact definitions, their counts) was ~8 ms a
    run: runs whose tools, prompts and window are the same share it, whoever they act for."""
    chosen: list[int] = []
    original = assembly_module.fit_to_window

    def counted(*args: Any, **kwargs: Any) -> Any:
        chosen.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(assembly_module, "fit_to_window", counted)
    assembly = agent(Built(), [])
    for user in ("u1", "u2", "u3"):
        assembly.settings(spec(user, "k1", f"s-{user}"))
    assert len(chosen) == 1
    assembly.settings(spec("u1", "k1", "s4", mode="teaching"))  # fewer tools: another offer
    assembly.settings(spec("u1", "k1", "s5", limit=8))  # another window
    assert len(chosen) == 3


def test_the_graph_is_compiled_once_per_checkpointer(monkeypatch: pytest.MonkeyPatch):
    compiled: list[Any] = []
    original = assembly_module.compile_agent_graph

    def counted(checkpointer: Any) -> Any:
        compiled.append(checkpointer)
        return original(checkpointer)

    monkeypatch.setattr(assembly_module, "compile_agent_graph", counted)
    assembly, saver, other = agent(Built(), []), InMemorySaver(), InMemorySaver()
    graphs = [assembly.graph(spec("u1", "k1", "s1"), saver), assembly.graph(spec("u2", "k1", "s2"), saver)]
    assert compiled == [saver] and graphs[0] is not graphs[1]
    assembly.graph(spec("u1", "k1", "s3"), other)
    assert compiled == [saver, other]


async def test_check_model_builds_in_a_worker_thread_once_then_finds_it_on_the_loop(monkeypatch: pytest.MonkeyPatch):
    """Every chat request checks its model; only a build (CPU work, an SDK import) is worth a worker
    thread: a model already built is found without one."""
    import asyncio
    import threading

    from gns3server.agent.gns3_copilot.agent.model.config import llm_profile

    built, loop_thread = Built(), threading.get_ident()
    threads: list[int] = []

    def bind(tools: Any, config: Any) -> object:
        threads.append(threading.get_ident())
        return built(tools, config)

    hops: list[Any] = []
    to_thread = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(assembly_module.asyncio, "to_thread", counted)
    assembly = AgentAssembly(tools_factory=lambda context: [], bind_tools=bind, is_context_length_error=lambda exc: False,
                             client_factory=lambda token: None)
    profile = llm_profile(spec("alice", "key-a", "s1").llm_config)
    await assembly.check_model("alice", profile)
    assert len(hops) == 1 and threads and threads[0] != loop_thread  # a miss: built off the loop
    await assembly.check_model("alice", profile)
    assert len(hops) == 1 and len(built.asked) == 1  # a hit: no thread, nothing built
    await assembly.check_model("bob", llm_profile(spec("bob", "key-b", "s2").llm_config))
    assert len(hops) == 2 and [key for key, _ in built.asked] == ["key-a", "key-b"]  # another user's: built again
    assert assembly.model("alice", profile, []) is assembly.model("alice", profile, [])  # the run's model is the one
    assert len(built.asked) == 2
