"""GNS3 3.1's copilot API faces on our server, over real HTTP.

What the 3.1 web UI relies on, checked route by route with the real
gns3-server (``gns3server-copilot``), real JWT auth and RBAC, and the
OpenAI-compatible stub as the LLM: client-chosen session ids (and no
hijacking), 3.1's shapes for sessions and history, pin/unpin, and the
``/v3/access/.../llm-model-configs`` routes over our one encrypted store
(``copilot_mode`` honoured, group configs inherited). The browser test with
the real 3.1 client is ``test_webui31_browser.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime
from typing import Any

import pytest
from conftest import COPILOT_SETTINGS
from gns3_process import GNS3ServerProcess
from test_copilot_api import (  # noqa: F401  (fixtures)
    API,
    COPILOT,
    SECRET,
    admin,
    chat_path,
    http,
    project,
    sessions_path,
    stub,
    users,
)

from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

ACCESS = "/v3/access"


def naive_utc(text: str) -> datetime:
    """A 3.1 timestamp: ISO 8601 without a zone (the web UI appends the ``Z``)."""
    parsed = datetime.fromisoformat(text)
    assert parsed.tzinfo is None and not text.endswith("Z"), text
    return parsed


async def user_id(api: API) -> str:
    status, me = await api.get(f"{ACCESS}/users/me")
    assert status == 200, me
    return str(me["user_id"])


def model_config(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    """A body as 3.1's web UI sends it (LLMModelConfigCreate), nulls included."""
    return {"name": "Stub model", "model_type": "text", "provider": "openai", "base_url": stub.base_url,
            "model": "stub-model", "temperature": 0.7, "api_key": SECRET, "max_tokens": None,
            "context_limit": 16, "context_strategy": "balanced", "copilot_mode": "teaching_assistant",
            "is_default": True, "max_retries": 0, "timeout": 20, **extra}


def offered_tools(stub: OpenAIStub) -> set[str]:
    return {t["function"]["name"] for t in stub.requests[-1]["tools"]}


# ---------------------------------------------------------- sessions


async def test_a_client_chosen_id_creates_the_session_and_cannot_be_taken_over(users, stub, project):
    alice = await users("alice31")
    bob = await users("bob31")
    await alice.use_llm(stub)
    await bob.use_llm(stub)
    chosen = str(uuid.uuid4())
    stub.enqueue("Hello Alice.")
    status, result = await alice.post(chat_path(project), {"message": "Hi", "session_id": chosen, "stream": False})
    assert status == 200 and result["session_id"] == chosen, result

    status, listed = await alice.get(sessions_path(project))
    assert [s["thread_id"] for s in listed] == [chosen]
    assert listed[0]["message_count"] == 2 and listed[0]["pinned"] is False

    # Bob naming Alice's id is told exactly what he is told for an id that does not exist.
    status, hijack = await bob.post(chat_path(project), {"message": "mine now", "session_id": chosen})
    status_unknown, unknown = await bob.post(chat_path(project), {"message": "x", "session_id": "no-such-session"})
    assert status == status_unknown == 404
    assert hijack["message"].replace(chosen, "ID") == unknown["message"].replace("no-such-session", "ID")
    for method, tail, body in (("GET", "/history", None), ("PUT", "/pin", None), ("DELETE", "/pin", None),
                               ("PATCH", "", {"title": "bob's"}), ("DELETE", "", None)):
        status, answer = await bob.call(method, sessions_path(project, chosen, tail), body)
        assert status == 404, (method, tail, answer)
    status, bob_sessions = await bob.get(sessions_path(project))
    assert bob_sessions == []

    # Nothing of Alice's changed; her second message continues the same session.
    stub.enqueue("Still you.")
    status, result = await alice.post(chat_path(project), {"message": "Again", "session_id": chosen, "stream": False})
    assert status == 200 and result["session_id"] == chosen
    status, history = await alice.get(sessions_path(project, chosen, "/history"))
    assert [m["content"] for m in history["messages"]] == ["Hi", "Hello Alice.", "Again", "Still you."]
    assert len(stub.requests) == 2  # Bob's attempts never reached the LLM


async def test_history_and_session_list_have_31s_shapes(admin, stub, project):
    await admin.use_llm(stub)
    stub.enqueue(reply("Looking.", tool_calls=[tool_call("gns3_topology", {"project_id": project})]), "Empty lab.")
    status, result = await admin.post(chat_path(project), {"message": "What is there?", "stream": False})
    assert status == 200, result
    session_id = result["session_id"]

    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert status == 200
    assert history["thread_id"] == session_id and history["title"] == "What is there?"
    naive_utc(history["created_at"]), naive_utc(history["updated_at"])
    messages = history["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert all(isinstance(m["id"], str) and m["id"] for m in messages)
    assert len({m["id"] for m in messages}) == 4
    assert all(isinstance(m["metadata"], dict) for m in messages)
    call = messages[1]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "gns3_topology"
    assert json.loads(call["function"]["arguments"]) == {"project_id": project}
    assert call["name"] == "gns3_topology" and call["args"] == {"project_id": project}  # ours, additive
    assert messages[2]["tool_call_id"] == call["id"] and messages[2]["name"] == "gns3_topology"

    status, listed = await admin.get(sessions_path(project))
    session = next(s for s in listed if s["thread_id"] == session_id)
    assert session["message_count"] == 4 and session["title"] == "What is there?"
    created, updated = naive_utc(session["created_at"]), naive_utc(session["updated_at"])
    assert created <= updated and naive_utc(session["last_message_at"]) == updated
    assert session["metadata"] == {} and session["stats"] == {}
    assert session["session_id"] == session_id and session["runs"] == 1  # ours, additive

    # 3.1's ?limit: the last N messages, their ids those of the whole conversation; bad values are 422s.
    status, last = await admin.get(sessions_path(project, session_id, "/history") + "?limit=2")
    assert status == 200 and [m["id"] for m in last["messages"]] == [m["id"] for m in messages[2:]]
    status, everything = await admin.get(sessions_path(project, session_id, "/history") + "?limit=100")
    assert status == 200 and everything["messages"] == messages
    for bad in ("0", "-1", "two", "1.5", "100001"):
        status, body = await admin.get(sessions_path(project, session_id, "/history") + f"?limit={bad}")
        assert status == 422 and "limit" in body["message"], (bad, body)


async def test_pinned_sessions_are_listed_first(admin, stub, project):
    await admin.use_llm(stub)
    ids = []
    for text in ("first", "second", "third"):
        stub.enqueue("ok")
        ids.append((await admin.chat(project, text))["session_id"])

    def order(listed: list[dict[str, Any]]) -> list[str]:
        return [s["session_id"] for s in listed if s["session_id"] in ids]

    status, listed = await admin.get(sessions_path(project))
    assert order(listed) == ids[::-1]  # newest first
    before = next(s for s in listed if s["session_id"] == ids[0])

    status, pinned = await admin.put(sessions_path(project, ids[0], "/pin"))
    assert status == 200 and pinned["pinned"] is True and pinned["thread_id"] == ids[0]
    assert pinned["updated_at"] == before["updated_at"]  # pinning is not using the session
    status, listed = await admin.get(sessions_path(project))
    assert order(listed) == [ids[0], ids[2], ids[1]]

    status, unpinned = await admin.delete(sessions_path(project, ids[0], "/pin"))
    assert status == 200 and unpinned["pinned"] is False
    status, listed = await admin.get(sessions_path(project))
    assert order(listed) == ids[::-1]
    status, _body = await admin.put(sessions_path(project, str(uuid.uuid4()), "/pin"))
    assert status == 404


# ------------------------------------------------------ LLM model configs


async def test_user_model_configs_share_our_store_and_honour_copilot_mode(users, stub, project, admin):
    carol = await users("carol31")
    carol_id = await user_id(carol)
    base = f"{ACCESS}/users/{carol_id}/llm-model-configs"
    status, empty = await carol.get(base)
    assert status == 200 and empty == {"configs": [], "default_config": None, "total": 0}
    status, body = await carol.get(base + "/default")
    assert status == 404

    status, created = await carol.post(base, model_config(stub))
    assert status == 201, created
    config_id = created["config_id"]
    assert created["config"]["api_key"] is None and created["has_api_key"] is True
    assert created["name"] == "Stub model" and created["model_type"] == "text" and created["is_default"] is True
    assert created["user_id"] == carol_id and created["group_id"] is None
    assert created["config"]["copilot_mode"] == "teaching_assistant" and "max_tokens" not in created["config"]

    # One store, two faces.
    status, ours = await carol.get(f"{COPILOT}/llm-configs")
    assert [c["config_id"] for c in ours["configs"]] == [config_id] and ours["default_config_id"] == config_id
    status, listed = await carol.get(base)
    assert listed["total"] == 1 and listed["default_config"]["config_id"] == config_id
    assert listed["configs"][0]["source"] == "user"
    status, own = await carol.get(base + "/own")
    assert [c["config_id"] for c in own] == [config_id]

    # No mode in the request (as the 3.1 web UI sends it): the config's copilot_mode decides.
    stub.enqueue("Teaching.")
    await carol.chat(project, "hi")
    assert "gns3_topology" in offered_tools(stub) and "gns3_create_node" not in offered_tools(stub)
    status, switched = await carol.put(f"{base}/{config_id}", {"copilot_mode": "lab_automation_assistant"})
    assert status == 200 and switched["config"]["copilot_mode"] == "lab_automation_assistant"
    assert switched["has_api_key"] is True  # the key was kept
    stub.enqueue("Automating.")
    await carol.chat(project, "hi again")
    assert "gns3_create_node" in offered_tools(stub)
    assert stub.received[-1].headers["Authorization"] == f"Bearer {SECRET}"
    stub.enqueue("Named mode wins.")
    await carol.chat(project, "and teaching", mode="teaching")
    assert "gns3_create_node" not in offered_tools(stub)

    # Optimistic locking, as 3.1.
    status, body = await carol.put(f"{base}/{config_id}", {"name": "x", "expected_version": switched["version"] - 1})
    assert status == 409, body
    status, renamed = await carol.put(f"{base}/{config_id}", {"name": "Renamed", "expected_version": switched["version"]})
    assert status == 200 and renamed["name"] == "Renamed" and renamed["version"] != switched["version"]

    # A second config; switching the default as the UI's model chip does.
    status, second = await carol.post(base, model_config(stub, name="Other", is_default=False))
    assert status == 201 and second["is_default"] is False
    status, chosen = await carol.put(f"{base}/default/{second['config_id']}", {})
    assert status == 200 and chosen["is_default"] is True
    status, default = await carol.get(base + "/default")
    assert default["config_id"] == second["config_id"]
    status, body = await carol.put(f"{base}/{second['config_id']}", {"is_default": False})
    assert status == 200 and body["is_default"] is False
    status, listed = await carol.get(base)
    assert listed["default_config"] is None  # no default: chats use the server's

    # Bad input: 422 naming the field, never echoing the key; nothing stored.
    status, body = await carol.post(base, model_config(stub, context_limit="big"))
    assert status == 422 and body["field"] == "context_limit", body
    status, body = await carol.post(base, model_config(stub, copilot_mode="hacker"))
    assert status == 422 and body["field"] == "copilot_mode", body
    status, body = await carol.post(base, [1, 2])
    assert status == 422
    status, listed = await carol.get(base)
    assert listed["total"] == 2

    status, _ = await carol.delete(f"{base}/{second['config_id']}")
    assert status == 204
    status, body = await carol.delete(f"{base}/{second['config_id']}")
    assert status == 404

    # Permissions: another user may not; an administrator may.
    dave = await users("dave31")
    for method, path, body in (("GET", base, None), ("GET", base + "/own", None), ("POST", base, model_config(stub)),
                               ("PUT", f"{base}/{config_id}", {"name": "dave's"}),
                               ("DELETE", f"{base}/{config_id}", None)):
        status, answer = await dave.call(method, path, body)
        assert status == 403, (method, path, answer)
    status, seen = await admin.get(base + "/own")
    assert status == 200 and [c["config_id"] for c in seen] == [config_id]
    status, body = await admin.get(f"{ACCESS}/users/{uuid.uuid4()}/llm-model-configs")
    assert status == 404


async def test_group_configs_are_inherited_by_members_only(users, stub, project, admin):
    erin = await users("erin31")
    frank = await users("frank31")
    erin_id = await user_id(erin)
    status, group = await admin.post(f"{ACCESS}/groups", {"name": f"class-{uuid.uuid4().hex[:6]}"})
    assert status == 201, group
    group_id = group["user_group_id"]
    status, body = await admin.put(f"{ACCESS}/groups/{group_id}/members/{erin_id}")
    assert status == 204, body
    base = f"{ACCESS}/groups/{group_id}/llm-model-configs"

    status, created = await admin.post(base, model_config(stub, name="Class model"))
    assert status == 201, created
    assert created["group_id"] == group_id and created["user_id"] is None and created["config"]["api_key"] is None

    status, mine = await erin.get(f"{ACCESS}/users/{erin_id}/llm-model-configs")
    assert status == 200 and mine["total"] == 1
    inherited = mine["configs"][0]
    assert inherited["source"] == "group" and inherited["group_name"] == group["name"]
    assert mine["default_config"]["config_id"] == created["config_id"]
    status, listed = await erin.get(base)
    assert status == 200 and listed["default_config"]["config_id"] == created["config_id"]

    # Erin has no config of her own: her chat uses the group's (and its teaching mode).
    stub.enqueue("From the class model.")
    result = await erin.chat(project, "hello")
    assert result["content"] == "From the class model."
    assert "gns3_create_node" not in offered_tools(stub)

    # Members read, only administrators change; others cannot even read.
    status, body = await erin.post(base, model_config(stub))
    assert status == 403
    status, body = await erin.put(f"{base}/{created['config_id']}", {"name": "erin's"})
    assert status == 403
    status, body = await frank.get(base)
    assert status == 403
    status, body = await frank.post(chat_path(project), {"message": "x"})
    assert status == 400 and body["code"] == "llm_not_configured"
    status, body = await admin.get(f"{ACCESS}/groups/{uuid.uuid4()}/llm-model-configs")
    assert status == 404
    status, _ = await admin.delete(f"{base}/{created['config_id']}")
    assert status == 204
    status, body = await erin.post(chat_path(project), {"message": "x"})
    assert status == 400


async def test_the_server_default_is_listed_read_only_under_a_stable_id(tmp_path, monkeypatch, http):
    """A server with a default LLM in its config file: 3.1's model list shows it, and it can be chosen."""
    server_key = "sk-server-default-6d1f0a9c2b47"
    monkeypatch.setenv("GNS3_COPILOT_LLM_API_KEY", server_key)
    async with OpenAIStub(api_key=server_key) as server_llm, OpenAIStub(api_key=SECRET) as own_llm:
        settings = {**COPILOT_SETTINGS, "llm_model": "server-model", "llm_base_url": server_llm.base_url,
                    "llm_context_limit": 16, "llm_max_retries": 0}
        process = await asyncio.to_thread(GNS3ServerProcess.start, tmp_path / "server", copilot=settings)
        try:
            admin = API(http, process.base_url, await process.token(), (server_key, SECRET))  # keys never answered
            base = f"{ACCESS}/users/{await user_id(admin)}/llm-model-configs"
            status, listed = await admin.get(base)
            assert status == 200 and listed["total"] == 1, listed
            (server,) = listed["configs"]
            assert (server["config_id"], server["source"], server["is_default"], server["has_api_key"]) == (
                "server-default", "server", True, True)
            assert server["config"]["model"] == "server-model" and server["config"]["api_key"] is None
            assert listed["default_config"] == server
            status, default = await admin.get(base + "/default")
            assert status == 200 and default["config_id"] == "server-default"
            # Ours names it the same way.
            status, ours = await admin.get(f"{COPILOT}/llm-configs")
            assert ours["server_default_id"] == "server-default" and ours["default_config_id"] is None
            status, effective = await admin.get(f"{COPILOT}/llm-configs/default")
            assert (effective["source"], effective["config_id"]) == ("server", "server-default")

            # The user's own default comes first; the server's stays listed, no longer the default.
            status, own = await admin.post(base, model_config(own_llm))
            assert status == 201, own
            status, listed = await admin.get(base)
            assert [(c["config_id"], c["is_default"]) for c in listed["configs"]] == [
                (own["config_id"], True), ("server-default", False)]
            assert listed["default_config"]["config_id"] == own["config_id"]

            # Chosen in 3.1's model chip: the user's default is cleared, chats use the server's model.
            status, chosen = await admin.put(f"{base}/default/server-default", {})
            assert status == 200 and chosen["config_id"] == "server-default" and chosen["is_default"], chosen
            status, default = await admin.get(base + "/default")
            assert default["config_id"] == "server-default"
            status, made = await admin.post("/v3/projects", {"name": "server-default"})
            assert status == 201, made
            server_llm.enqueue("From the server's model.")
            result = await admin.chat(made["project_id"], "Hello")
            assert result["content"] == "From the server's model." and server_llm.requests[-1]["model"] == "server-model"
            own_llm.enqueue("From mine.")
            result = await admin.chat(made["project_id"], "Hello", llm_config_id=own["config_id"])
            assert result["content"] == "From mine."
            server_llm.enqueue("Named.")
            result = await admin.chat(made["project_id"], "Hello", llm_config_id="server-default")
            assert result["content"] == "Named."

            # Read-only here: the administrator changes it in the config file.
            status, body = await admin.put(f"{base}/server-default", {"copilot_mode": "lab_automation_assistant"})
            assert status == 403 and body["code"] == "server_default_read_only", body
            status, body = await admin.delete(f"{base}/server-default")
            assert status == 403 and body["code"] == "server_default_read_only", body
        finally:
            await asyncio.to_thread(process.stop)


# ------------------------------------------- fault injection and prompts


async def test_an_injected_fault_is_hidden_revealed_to_its_injector_and_reverted(users, stub, admin):
    teacher = await users("teacher31")
    student = await users("student31")
    await teacher.use_llm(stub)
    await student.use_llm(stub)
    status, made = await admin.post("/v3/projects", {"name": f"faults-{uuid.uuid4().hex[:8]}"})
    assert status == 201
    pid = made["project_id"]
    try:
        # Never started: GNS3 3.0 refuses to start Debian's VPCS 0.8 (tests drive the daemon itself), and
        # stopping a stopped node succeeds, which is all the injection needs to be recorded as a fault.
        status, node = await admin.post(f"/v3/projects/{pid}/nodes",
                                        {"name": "PC1", "node_type": "vpcs", "compute_id": "local"})
        assert status == 201, node

        stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {"project_id": pid}),
                                       tool_call("gns3_node_action", {"action": "stop", "nodes": ["PC1"]})]),
                     "A fault was injected.")
        chosen = str(uuid.uuid4())
        status, result = await teacher.post(f"{COPILOT}/projects/{pid}/chat/inject",
                                            {"message": "Inject random network fault(s)", "session_id": chosen,
                                             "stream": False})
        assert status == 200 and result["session_id"] == chosen, result
        assert result["content"] == "A fault was injected."
        assert "fault injection" in stub.requests[0]["messages"][0]["content"]  # the injection prompt
        end = [m for m in stub.requests[1]["messages"] if m["role"] == "tool"][-1]  # gns3_node_action's result
        assert "\"failed\": 0" in end["content"], end  # done for real, through our node tool

        # The session is marked as 3.1 marks it; its history hides the fault from whoever reads it...
        status, listed = await teacher.get(sessions_path(pid))
        assert listed[0]["metadata"] == {"copilot_mode": "troubleshooting_injection"}
        status, history = await teacher.get(sessions_path(pid, chosen, "/history"))
        tool_messages = [m for m in history["messages"] if m["role"] == "tool"]
        assert tool_messages and all(m["content"].startswith("[hidden") for m in tool_messages)
        assert all(c["args"] == {} for m in history["messages"] for c in m.get("tool_calls") or [])
        assert "PC1" not in json.dumps(history)
        # ...and the student sees neither the session nor the faults.
        status, theirs = await student.get(sessions_path(pid))
        assert theirs == []
        status, body = await student.get(sessions_path(pid, chosen, "/history") + "?reveal=true")
        assert status == 404
        status, none = await student.get(f"{COPILOT}/projects/{pid}/faults")
        assert status == 200 and none == []

        # The injector reveals: only the lab-changing call is a fault.
        status, revealed = await teacher.get(sessions_path(pid, chosen, "/history") + "?reveal=true")
        assert "PC1" in json.dumps(revealed)
        status, faults = await teacher.get(f"{COPILOT}/projects/{pid}/faults")
        assert [(f["tool"], f["args"], f["status"], f["revertible"]) for f in faults] == [
            ("gns3_node_action", {"action": "stop", "nodes": ["PC1"]}, "success", True)]
        fault_id = faults[0]["fault_id"]
        status, body = await student.post(f"{COPILOT}/projects/{pid}/faults/{fault_id}/revert")
        assert status == 404

        # Reverting starts the node through the same tool, as the teacher; here GNS3 refuses (VPCS 0.8),
        # which is reported, and the fault stays unreverted.
        status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{fault_id}/revert")
        assert status == 409 and body["code"] == "fault_not_revertible" and "VPCS" in body["message"], body
        status, faults = await teacher.get(f"{COPILOT}/projects/{pid}/faults")
        assert faults[0]["reverted_at"] is None and faults[0]["revertible"] is True

        # A plain chat session cannot be used for an injection.
        stub.enqueue("hi")
        plain = (await teacher.chat(pid, "hello"))["session_id"]
        status, body = await teacher.post(f"{COPILOT}/projects/{pid}/chat/inject", {"session_id": plain})
        assert status == 409 and body["code"] == "session_kind"
    finally:
        await admin.delete(f"/v3/projects/{pid}")


async def test_reload_skills_reads_the_administrators_prompt_files(gns3_server, admin, users, stub, project):
    prompts_dir = gns3_server.root / "config" / "copilot-prompts"  # [Copilot] prompts_dir (conftest)
    status, body = await (await users("alice31")).post(f"{COPILOT}/reload/skills")
    assert status == 403
    status, body = await admin.post(f"{COPILOT}/reload/skills")
    assert status == 200 and set(body["sources"].values()) == {"packaged"}, body

    prompts_dir.mkdir(parents=True, exist_ok=True)
    (prompts_dir / "teaching.md").write_text("teaching. Answer only in haiku.\n")
    try:
        (prompts_dir / "system.md").write_text("No placeholders here.\n")
        status, body = await admin.post(f"{COPILOT}/reload/skills")
        assert status == 422 and "system.md" in body["message"] and "{mode_rules}" in body["message"]
        (prompts_dir / "system.md").unlink()

        await admin.use_llm(stub)
        stub.enqueue("before")
        await admin.chat(project, "hi", mode="teaching")
        assert "haiku" not in stub.requests[-1]["messages"][0]["content"]  # not before a reload
        status, body = await admin.post(f"{COPILOT}/reload/skills")
        assert status == 200 and body["sources"]["teaching.md"].endswith("teaching.md"), body
        stub.enqueue("after")
        await admin.chat(project, "hi", mode="teaching")
        assert "Answer only in haiku." in stub.requests[-1]["messages"][0]["content"]
    finally:
        for file in prompts_dir.iterdir():
            file.unlink()
        status, body = await admin.post(f"{COPILOT}/reload/skills")
        assert status == 200
