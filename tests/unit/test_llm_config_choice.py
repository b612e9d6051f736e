"""Which LLM config a run uses, and that the user's groups are read only when they decide it.

Reading a user's GNS3 group memberships is a query of GNS3's database; the user's own
configs decide most lookups, so the groups are read (once) only when they do not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest
from cryptography.fernet import Fernet

from gns3server.agent.gns3_copilot.api.crypto import SecretBox
from gns3server.agent.gns3_copilot.api.dependencies import Memberships
from gns3server.agent.gns3_copilot.api.errors import LLMConfigNotFoundError
from gns3server.agent.gns3_copilot.api.llm_config_store import LLMConfigStore
from gns3server.agent.gns3_copilot.api.model_configs31 import default_record, group_owner, named_record

ALICE = "7d0c2a4e-1f3b-4c5d-8e9f-0a1b2c3d4e5f"
STUDENTS, TEACHERS = "5b1e7c3a-2d4f-4a6b-9c8d-1e2f3a4b5c6d", "6c2f8d4b-3e5a-4b7c-8d9e-2f3a4b5c6d7e"


class Groups:
    """A user's group ids, counting how often they were asked for."""

    def __init__(self, *ids: str) -> None:
        self.ids, self.asked = list(ids), 0

    async def __call__(self) -> Sequence[str]:
        self.asked += 1
        return self.ids


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[LLMConfigStore]:
    configs = await LLMConfigStore.open(tmp_path, SecretBox(Fernet.generate_key()))
    try:
        yield configs
    finally:
        await configs.close()


async def config(store: LLMConfigStore, owner: str, model: str, *, default: bool = True) -> str:
    record = await store.create(owner, {"model": model, "context_limit": 8192}, make_default=default)
    return record.config_id


async def test_the_users_own_default_is_chosen_without_reading_their_groups(store: LLMConfigStore) -> None:
    await config(store, group_owner(STUDENTS), "group-model")
    await config(store, ALICE, "own-model")
    groups = Groups(STUDENTS)
    record = await default_record(store, ALICE, groups)
    assert record is not None and record.config["model"] == "own-model"
    assert groups.asked == 0


async def test_without_a_default_of_their_own_a_groups_default_is_chosen(store: LLMConfigStore) -> None:
    await config(store, group_owner(TEACHERS), "teachers-model")
    groups = Groups(STUDENTS, TEACHERS)  # the first group has none: the next one's
    record = await default_record(store, ALICE, groups)
    assert record is not None and record.config["model"] == "teachers-model"
    assert groups.asked == 1


async def test_no_default_anywhere_leaves_the_server_default(store: LLMConfigStore) -> None:
    await config(store, group_owner(TEACHERS), "not-alices-group")
    groups = Groups(STUDENTS)
    assert await default_record(store, ALICE, groups) is None  # the caller then uses the server's
    assert groups.asked == 1


async def test_a_named_config_of_the_users_own_is_found_without_reading_their_groups(store: LLMConfigStore) -> None:
    await config(store, ALICE, "own-default")
    named = await config(store, ALICE, "own-other", default=False)
    groups = Groups(STUDENTS)
    assert (await named_record(store, ALICE, groups, named)).config["model"] == "own-other"
    assert groups.asked == 0


async def test_a_named_config_of_a_group_of_the_user_is_found(store: LLMConfigStore) -> None:
    named = await config(store, group_owner(TEACHERS), "teachers-model")
    groups = Groups(STUDENTS, TEACHERS)
    assert (await named_record(store, ALICE, groups, named)).config["model"] == "teachers-model"
    assert groups.asked == 1


async def test_a_named_config_of_a_group_the_user_is_not_in_is_still_refused(store: LLMConfigStore) -> None:
    theirs = await config(store, group_owner(TEACHERS), "teachers-model")
    someone_elses = await config(store, "bob", "bobs-model")
    for config_id in (theirs, someone_elses, "no-such-config"):
        with pytest.raises(LLMConfigNotFoundError):
            await named_record(store, ALICE, Groups(STUDENTS), config_id)


class Users:
    """GNS3's UsersRepository as far as memberships go; counts the queries."""

    def __init__(self, *group_ids: str) -> None:
        self.group_ids, self.queries = group_ids, 0

    async def get_user_memberships(self, user_id: UUID) -> list[Any]:
        assert user_id == UUID(ALICE)
        self.queries += 1
        return [SimpleNamespace(user_group_id=UUID(g)) for g in self.group_ids]


async def test_a_requests_memberships_are_read_when_first_asked_for_and_once() -> None:
    users = Users(STUDENTS, TEACHERS)
    memberships = Memberships(ALICE, users)  # type: ignore[arg-type]
    assert users.queries == 0  # made by the dependency: nothing read yet
    assert await memberships() == [STUDENTS, TEACHERS]
    assert await memberships() == [STUDENTS, TEACHERS]
    assert users.queries == 1


async def test_the_server_default_named_by_its_id_reads_no_store_and_no_groups() -> None:
    from gns3server.agent.gns3_copilot.api.model_configs31 import SERVER_DEFAULT_ID
    from gns3server.agent.gns3_copilot.api.state import CopilotState

    groups = Groups(STUDENTS)
    state: Any = SimpleNamespace(llm_configs=None)  # any read of the store would fail
    assert await CopilotState._record_for(state, ALICE, SERVER_DEFAULT_ID, groups) is None
    assert groups.asked == 0
