"""GNS3 3.1's LLM-model-config routes, under ``/v3/access/users/{user_id}/...`` and
``/v3/access/groups/{group_id}/...``, over the copilot's one encrypted config store.

Permissions: a user reads and changes their own configs; an administrator
anyone's and every group's; a group's configs are read by its members (they
inherit them). Anything else is a 403. API keys are write-only. Bodies are
checked by the same schema as ``/v3/copilot/llm-configs`` (422 naming the field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Depends, status
from gns3server.api.routes.controller.dependencies.database import get_repository
from gns3server.db.repositories.users import UsersRepository

from ...agent.model.config import LLMConfigError
from ...service.copilot import User
from ..dependencies import CurrentUser, State
from ..errors import AdminOnlyError, LLMConfigNotFoundError
from ..model_configs31 import (
    GROUP_OWNER_PREFIX,
    SERVER_DEFAULT_ID,
    check_version,
    config_fields,
    effective_configs,
    group_owner,
    group_view,
    server_view,
    user_view,
)
from ..schemas31 import LLMModelConfig, LLMModelConfigInherited, LLMModelConfigList
from ..state import CopilotState

router = APIRouter()

Users = Annotated[UsersRepository, Depends(get_repository(UsersRepository))]
# Typed Any so that pydantic's own 422 (which quotes the input) never echoes an API key.
ConfigBody = Annotated[Any, Body(description="3.1's LLMModelConfigCreate/Update fields", json_schema_extra={"type": "object"})]

_USER = "/users/{user_id}/llm-model-configs"
_GROUP = "/groups/{group_id}/llm-model-configs"
_RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"description": "Not your configs (or not an administrator)"},
    404: {"description": "No such user, group or config"},
    409: {"description": "expected_version is not the config's version"},
    413: {"description": "Request body too large"},
    422: {"description": "The config fails the schema: message, field, rule, errors[]"},
}


def _object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise LLMConfigError("config", "type", "must be a JSON object (an LLM model config)")
    return body


class ServerDefaultReadOnlyError(AdminOnlyError):
    """The server-wide default is the administrator's, in the server's config file."""

    code = "server_default_read_only"


def _not_server_default(config_id: str) -> None:
    if config_id == SERVER_DEFAULT_ID:
        raise ServerDefaultReadOnlyError(
            f"{SERVER_DEFAULT_ID} is the server-wide default: it is read-only here (the administrator sets it "
            "in the [Copilot] section of the server's config file)"
        )


class NotFoundError(LLMConfigNotFoundError):
    """No such user or group (same status and shape as an unknown config)."""

    code = "not_found"


async def _user_owner(user_id: UUID, caller: User, users: UsersRepository) -> str:
    """The owner key of ``user_id``'s configs, once the caller may manage them."""
    if str(user_id) != caller.user_id:
        if not caller.is_superadmin:
            raise AdminOnlyError("Only an administrator may manage another user's LLM model configurations")
        if await users.get_user(user_id) is None:
            raise NotFoundError(f"User '{user_id}' not found")
    return str(user_id)


async def _groups_of(user_id: str, users: UsersRepository) -> list[tuple[str, str]]:
    return [(str(g.user_group_id), str(g.name)) for g in await users.get_user_memberships(UUID(user_id))]


async def _group_owner(group_id: UUID, caller: User, users: UsersRepository, *, write: bool) -> str:
    """The owner key of a group's configs: administrators manage them, members read them."""
    if await users.get_user_group(group_id) is None:
        raise NotFoundError(f"User group '{group_id}' not found")
    if not caller.is_superadmin:
        if write:
            raise AdminOnlyError("Only an administrator may change a group's LLM model configurations")
        if str(group_id) not in {g for g, _ in await _groups_of(caller.user_id, users)}:
            raise AdminOnlyError("Only members of the group (or an administrator) may read its LLM model configurations")
    return group_owner(str(group_id))


def _judged_as(caller: User, owner: str) -> User:
    """Whose rights an endpoint saved for ``owner`` is judged with: as it will be when it runs.

    A user's own config is judged again with that user's rights at every run, so one an
    administrator saves for another user is judged with a user's rights now (refused when
    saved, not at each of that user's chats); a group's config is the administrator's choice.
    """
    if owner == caller.user_id or owner.startswith(GROUP_OWNER_PREFIX) or not caller.is_superadmin:
        return caller
    return replace(caller, is_superadmin=False)


async def _create(state: CopilotState, caller: User, owner: str, body: Any) -> Any:
    """Create; the endpoint is judged as it will be when the config runs (:func:`_judged_as`)."""
    data = _object(body)
    return await state.llm_configs.create(
        owner, config_fields(data, creating=True), make_default=bool(data.get("is_default")),
        approve=partial(state.check_endpoint, _judged_as(caller, owner)),
    )


async def _update(state: CopilotState, caller: User, owner: str, config_id: str, body: Any) -> Any:
    """3.1's update: non-null fields change; ``is_default`` sets or clears the owner's default."""
    store = state.llm_configs
    data = _object(body)
    record = await store.get(owner, config_id)
    check_version(record, data.get("expected_version"))
    changes = config_fields(data, creating=False)
    if changes:
        record = await store.update(
            owner, config_id, changes, approve=partial(state.check_endpoint, _judged_as(caller, owner)))
    if data.get("is_default") is True:
        record = await store.set_default(owner, config_id)
    elif data.get("is_default") is False and record.is_default:
        await store.clear_default(owner)
        record = await store.get(owner, config_id)
    return record


# ---------------------------------------------------------------------- users


@router.get(_USER, response_model=LLMModelConfigInherited, responses=_RESPONSES)
async def get_user_configs(user_id: UUID, caller: CurrentUser, state: State, users: Users) -> LLMModelConfigInherited:
    """The user's own configs and those inherited from their groups, and the default in use."""
    owner = await _user_owner(user_id, caller, users)
    configs, default = await effective_configs(
        state.llm_configs, owner, await _groups_of(owner, users), state.server_default
    )
    return LLMModelConfigInherited(configs=configs, default_config=default, total=len(configs))


@router.get(_USER + "/own", response_model=list[LLMModelConfig], responses=_RESPONSES)
async def get_user_own_configs(user_id: UUID, caller: CurrentUser, state: State, users: Users) -> list[LLMModelConfig]:
    owner = await _user_owner(user_id, caller, users)
    return [user_view(r, owner) for r in await state.llm_configs.list(owner)]


@router.get(_USER + "/default", response_model=LLMModelConfig, responses=_RESPONSES)
async def get_user_default_config(user_id: UUID, caller: CurrentUser, state: State, users: Users) -> LLMModelConfig:
    """The user's own default, else the server-wide default (``server-default``); 404 if neither."""
    owner = await _user_owner(user_id, caller, users)
    record = await state.llm_configs.default(owner)
    if record is not None:
        return user_view(record, owner)
    if state.server_default is not None:
        return server_view(state.server_default, is_default=True)
    raise LLMConfigNotFoundError(f"No default LLM model configuration found for user '{user_id}'")


@router.post(_USER, response_model=LLMModelConfig, status_code=status.HTTP_201_CREATED, responses=_RESPONSES)
async def create_user_config(
    user_id: UUID, body: ConfigBody, caller: CurrentUser, state: State, users: Users
) -> LLMModelConfig:
    owner = await _user_owner(user_id, caller, users)
    return user_view(await _create(state, caller, owner, body), owner)


@router.put(_USER + "/default/{config_id}", response_model=LLMModelConfig, responses=_RESPONSES)
async def set_user_default_config(
    user_id: UUID, config_id: str, caller: CurrentUser, state: State, users: Users
) -> LLMModelConfig:
    """Choose the user's default; choosing ``server-default`` clears theirs, so chats use the server's."""
    owner = await _user_owner(user_id, caller, users)
    if config_id == SERVER_DEFAULT_ID and state.server_default is not None:
        await state.llm_configs.clear_default(owner)
        return server_view(state.server_default, is_default=True)
    return user_view(await state.llm_configs.set_default(owner, config_id), owner)


@router.put(_USER + "/{config_id}", response_model=LLMModelConfig, responses=_RESPONSES)
async def update_user_config(
    user_id: UUID, config_id: str, body: ConfigBody, caller: CurrentUser, state: State, users: Users
) -> LLMModelConfig:
    """Change the non-null fields (GNS3 3.1's web UI switches the copilot mode with ``{"copilot_mode": ...}``)."""
    owner = await _user_owner(user_id, caller, users)
    _not_server_default(config_id)
    return user_view(await _update(state, caller, owner, config_id, body), owner)


@router.delete(_USER + "/{config_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_RESPONSES)
async def delete_user_config(user_id: UUID, config_id: str, caller: CurrentUser, state: State, users: Users) -> None:
    owner = await _user_owner(user_id, caller, users)
    _not_server_default(config_id)
    await state.llm_configs.delete(owner, config_id)


# --------------------------------------------------------------------- groups


@router.get(_GROUP, response_model=LLMModelConfigList, responses=_RESPONSES)
async def get_group_configs(group_id: UUID, caller: CurrentUser, state: State, users: Users) -> LLMModelConfigList:
    owner = await _group_owner(group_id, caller, users, write=False)
    configs = [group_view(r, str(group_id)) for r in await state.llm_configs.list(owner)]
    default = next((c for c in configs if c.is_default), None)
    return LLMModelConfigList(configs=configs, default_config=default, total=len(configs))


@router.get(_GROUP + "/default", response_model=LLMModelConfig, responses=_RESPONSES)
async def get_group_default_config(group_id: UUID, caller: CurrentUser, state: State, users: Users) -> LLMModelConfig:
    owner = await _group_owner(group_id, caller, users, write=False)
    record = await state.llm_configs.default(owner)
    if record is None:
        raise LLMConfigNotFoundError(f"No default LLM model configuration found for group '{group_id}'")
    return group_view(record, str(group_id))


@router.post(_GROUP, response_model=LLMModelConfig, status_code=status.HTTP_201_CREATED, responses=_RESPONSES)
async def create_group_config(
    group_id: UUID, body: ConfigBody, caller: CurrentUser, state: State, users: Users
) -> LLMModelConfig:
    owner = await _group_owner(group_id, caller, users, write=True)
    return group_view(await _create(state, caller, owner, body), str(group_id))


@router.put(_GROUP + "/default/{config_id}", response_model=LLMModelConfig, responses=_RESPONSES)
async def set_group_default_config(
    group_id: UUID, config_id: str, caller: CurrentUser, state: State, users: Users
) -> LLMModelConfig:
    owner = await _group_owner(group_id, caller, users, write=True)
    return group_view(await state.llm_configs.set_default(owner, config_id), str(group_id))


@router.put(_GROUP + "/{config_id}", response_model=LLMModelConfig, responses=_RESPONSES)
async def update_group_config(
    group_id: UUID, config_id: str, body: ConfigBody, caller: CurrentUser, state: State, users: Users
) -> LLMModelConfig:
    owner = await _group_owner(group_id, caller, users, write=True)
    return group_view(await _update(state, caller, owner, config_id, body), str(group_id))


@router.delete(_GROUP + "/{config_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_RESPONSES)
async def delete_group_config(group_id: UUID, config_id: str, caller: CurrentUser, state: State, users: Users) -> None:
    owner = await _group_owner(group_id, caller, users, write=True)
    await state.llm_configs.delete(owner, config_id)
