"""LLM config rules that keep secrets and runs safe: no credentials in base_url, finite numbers."""

from __future__ import annotations

import math

import pytest

from gns3server.agent.gns3_copilot.agent.model.config import LLMConfigError, validate_llm_config
from gns3server.agent.gns3_copilot.api.settings import SettingsError, load_settings

pytestmark = pytest.mark.security

BASE = {"model": "m", "context_limit": 8}


@pytest.mark.parametrize(
    "url",
    ["http://user:sk-secret@host/v1", "https://sk-secret@host/v1", "HTTP://a:b@127.0.0.1:8000", "http://:pw@h/"],
)
def test_credentials_in_base_url_are_refused_naming_api_key(url):
    with pytest.raises(LLMConfigError) as caught:
        validate_llm_config({**BASE, "base_url": url})
    assert (caught.value.field, caught.value.rule) == ("base_url", "credentials")
    assert "api_key" in str(caught.value) and "secret" not in str(caught.value)


@pytest.mark.parametrize("url", ["http://host/v1?next=a@b", "https://host/v1#x@y", "http://host:8000/@v1"])
def test_an_at_sign_after_the_host_is_not_credentials(url):
    assert validate_llm_config({**BASE, "base_url": url})["base_url"] == url


@pytest.mark.parametrize("field", ["temperature", "timeout"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_numbers_must_be_finite(field, value):
    with pytest.raises(LLMConfigError) as caught:
        validate_llm_config({**BASE, field: value})
    assert caught.value.field == field


def test_the_server_default_obeys_the_same_rules():
    common = {"gns3_config_dir": "/tmp", "gns3_secrets_dir": None, "host": "127.0.0.1", "port": 3080, "ssl": False}
    values = {"llm_model": "m", "llm_context_limit": "8", "llm_base_url": "http://u:TopSecret1@h/v1"}
    with pytest.raises(SettingsError, match="llm_base_url") as caught:
        load_settings(values, **common)
    assert "TopSecret1" not in str(caught.value)
    with pytest.raises(SettingsError, match="llm_temperature"):
        load_settings({"llm_model": "m", "llm_context_limit": "8", "llm_temperature": "nan"}, **common)
    for key in ("heartbeat_seconds", "max_llm_calls"):
        with pytest.raises(SettingsError, match=key):
            load_settings({key: "nan" if key == "heartbeat_seconds" else "inf"}, **common)


async def test_credentials_stored_by_an_older_version_are_removed_at_start(tmp_path):
    import json
    import sqlite3
    import time

    from cryptography.fernet import Fernet

    from gns3server.agent.gns3_copilot.api.crypto import SecretBox
    from gns3server.agent.gns3_copilot.api.llm_config_store import DATABASE_NAME, LLMConfigStore

    box = SecretBox(Fernet.generate_key())
    store = await LLMConfigStore.open(tmp_path, box)
    await store.close()
    old = {"model": "m", "context_limit": 8, "base_url": "http://copilot:OldSecret42@10.0.0.5:11434/v1"}
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:
        db.execute("INSERT INTO copilot_llm_configs VALUES ('c1', 'u1', ?, NULL, 1, ?, ?)",
                   (json.dumps(old), time.time(), time.time()))
    store = await LLMConfigStore.open(tmp_path, box)
    try:
        record = await store.get("u1", "c1")
        assert record.config["base_url"] == "http://10.0.0.5:11434/v1"
    finally:
        await store.close()
    for path in tmp_path.iterdir():
        assert b"OldSecret42" not in path.read_bytes(), path


async def test_an_update_that_landed_meanwhile_is_not_overwritten(tmp_path):
    """The endpoint approval may wait (DNS): a change saved meanwhile is a 409, not lost."""
    import asyncio

    from cryptography.fernet import Fernet

    from gns3server.agent.gns3_copilot.api.crypto import SecretBox
    from gns3server.agent.gns3_copilot.api.errors import ConfigVersionConflictError
    from gns3server.agent.gns3_copilot.api.llm_config_store import LLMConfigStore

    store = await LLMConfigStore.open(tmp_path, SecretBox(Fernet.generate_key()))
    try:
        record = await store.create("u1", {"provider": "openai", "model": "m", "context_limit": 8,
                                           "base_url": "http://10.0.0.5:11434/v1"}, make_default=True)
        judging, decided = asyncio.Event(), asyncio.Event()

        async def slow_approval(config):
            judging.set()
            await decided.wait()

        first = asyncio.create_task(store.update("u1", record.config_id, {"model": "slow"}, approve=slow_approval))
        await asyncio.wait_for(judging.wait(), 30)
        await store.update("u1", record.config_id, {"model": "fast"})
        decided.set()
        with pytest.raises(ConfigVersionConflictError):
            await first
        assert (await store.get("u1", record.config_id)).config["model"] == "fast"
    finally:
        await store.close()
