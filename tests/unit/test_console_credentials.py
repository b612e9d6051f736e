"""The console credentials store: encrypted, masked when shown, a node's own before its template's."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from gns3server.agent.gns3_copilot.api.crypto import SecretBox
from gns3server.agent.gns3_copilot.console import Credentials, CredentialStore
from gns3server.agent.gns3_copilot.console.credentials import DATABASE_NAME, CredentialsUnreadableError


@pytest.fixture
async def store(tmp_path):
    opened = await CredentialStore.open(tmp_path, SecretBox(Fernet.generate_key()))
    yield opened
    await opened.close()


async def test_set_shows_masked_and_types_the_real_ones(store, tmp_path):
    info = await store.set("node", "n1", Credentials("admin", "S3cret-pw", "En-pw-9"), project_id="p1", set_by="alice")
    assert (info.username, info.password_set, info.enable_password_set, info.set_by) == ("a***", True, True, "alice")
    typed = await store.for_console("n1", None)
    assert typed is not None and (typed.username, typed.password, typed.enable_password, typed.source) == (
        "admin", "S3cret-pw", "En-pw-9", "node")
    assert "S3cret-pw" not in repr(typed) and "admin" not in repr(typed) and "S3cret-pw" not in repr(info)
    files = [tmp_path / DATABASE_NAME, tmp_path / f"{DATABASE_NAME}-wal"]
    assert not any(b"S3cret-pw" in f.read_bytes() or b"admin" in f.read_bytes() for f in files if f.exists())


async def test_a_nodes_own_win_over_its_templates(store):
    await store.set("template", "t1", Credentials("tuser", "tpass"), set_by="admin")
    assert (await store.for_console("n1", "t1")).source == "template"
    await store.set("node", "n1", Credentials(password="npass"), set_by="admin")
    own = await store.for_console("n1", "t1")
    assert (own.username, own.password, own.source) == (None, "npass", "node")
    assert await store.delete("node", "n1") and not await store.delete("node", "n1")
    assert (await store.for_console("n1", "t1")).password == "tpass"
    assert await store.for_console("n2", None) is None


async def test_nothing_to_set_is_refused(store):
    with pytest.raises(ValueError, match="credentials"):
        await store.set("node", "n1", Credentials(), set_by="admin")
    with pytest.raises(ValueError, match="scope"):
        await store.set("project", "n1", Credentials(password="x"), set_by="admin")  # type: ignore[arg-type]


async def test_a_replaced_server_key_says_to_set_them_again(tmp_path):
    first = await CredentialStore.open(tmp_path, SecretBox(Fernet.generate_key()))
    await first.set("node", "n1", Credentials("admin", "pw"), set_by="admin")
    await first.close()
    second = await CredentialStore.open(tmp_path, SecretBox(Fernet.generate_key()))
    try:
        with pytest.raises(CredentialsUnreadableError, match="set them again"):
            await second.for_console("n1", None)
    finally:
        await second.close()
