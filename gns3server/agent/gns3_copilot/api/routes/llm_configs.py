"""The current user's LLM configs: create, read, update, delete, and which one is the default.

Bodies are checked against the model factory's JSON Schema (422 naming the field
and the rule, never the value), then the endpoint against the administrator's
``user_llm_endpoints`` (403, see ``endpoints.py``). API keys are stored encrypted and only ever
returned masked (``sk-…abcd``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fastapi import APIRouter, status

from ...agent.model.config import LLMConfigError, llm_config_schema, redact_config
from ..dependencies import CurrentUser, State
from ..errors import LLMConfigNotFoundError, StoredKeyUnreadableError
from ..llm_config_store import LLMConfigRecord, LLMConfigStore
from ..model_configs31 import SERVER_DEFAULT_ID
from ..schemas import EffectiveLLMConfig, LLMConfig, LLMConfigCreate, LLMConfigList, LLMConfigUpdate

router = APIRouter()

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such LLM config of this user"}}
_INVALID: dict[int | str, dict[str, Any]] = {
    403: {"description": "base_url is an endpoint this user may not use ([Copilot] user_llm_endpoints)"},
    413: {"description": "Request body too large"},
    422: {"description": "The config fails the schema (message, field, rule, errors[]) or the body is invalid"},
}
UNREADABLE_KEY_MASK = "(unreadable: set it again)"


def _object(config: Any) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise LLMConfigError("config", "type", "must be a JSON object (an LLM config)")
    return config


def _view(store: LLMConfigStore, record: LLMConfigRecord) -> LLMConfig:
    """The record as returned: the key decrypted only to be masked."""
    try:
        shown = redact_config(store.usable(record))
    except StoredKeyUnreadableError:
        shown = {**record.config, "api_key": UNREADABLE_KEY_MASK}
    return LLMConfig(
        config_id=record.config_id,
        name=str(record.config.get("name") or record.config.get("model")),
        config=shown,
        has_api_key=record.has_api_key,
        is_default=record.is_default,
        created_at=datetime.fromtimestamp(record.created_at, tz=UTC),
        updated_at=datetime.fromtimestamp(record.updated_at, tz=UTC),
    )


@router.get("", response_model=LLMConfigList)
async def list_llm_configs(user: CurrentUser, state: State) -> LLMConfigList:
    """The user's configs, which one is their default, and the server-wide default."""
    records = await state.llm_configs.list(user.user_id)
    server = state.server_default
    return LLMConfigList(
        configs=[_view(state.llm_configs, r) for r in records],
        default_config_id=next((r.config_id for r in records if r.is_default), None),
        server_default=redact_config(server) if server is not None else None,
        server_default_id=SERVER_DEFAULT_ID if server is not None else None,
    )


@router.post("", response_model=LLMConfig, status_code=status.HTTP_201_CREATED, responses=_INVALID)
async def create_llm_config(body: LLMConfigCreate, user: CurrentUser, state: State) -> LLMConfig:
    record = await state.llm_configs.create(
        user.user_id, _object(body.config), make_default=body.is_default, approve=partial(state.check_endpoint, user)
    )
    return _view(state.llm_configs, record)


@router.get("/schema", response_model=dict[str, Any])
async def get_llm_config_schema(user: CurrentUser) -> dict[str, Any]:
    """The JSON Schema every LLM config is checked against (for building forms)."""
    return llm_config_schema()


@router.get(
    "/default",
    response_model=EffectiveLLMConfig,
    responses={404: {"description": "Neither the user nor the server has a default"}},
)
async def get_default_llm_config(user: CurrentUser, state: State) -> EffectiveLLMConfig:
    """The config a chat uses when it names none: the user's default, else the server's."""
    record = await state.llm_configs.default(user.user_id)
    if record is not None:
        return EffectiveLLMConfig(source="user", config_id=record.config_id, config=_view(state.llm_configs, record).config)
    if state.server_default is not None:
        return EffectiveLLMConfig(
            source="server", config_id=SERVER_DEFAULT_ID, config=redact_config(state.server_default)
        )
    raise LLMConfigNotFoundError("No default LLM config (neither the user's nor the server's)")


@router.delete("/default", status_code=status.HTTP_204_NO_CONTENT)
async def clear_default_llm_config(user: CurrentUser, state: State) -> None:
    """The user has no default any more: chats use the server's default."""
    await state.llm_configs.clear_default(user.user_id)


@router.put("/default/{config_id}", response_model=LLMConfig, responses=_NOT_FOUND)
async def set_default_llm_config(config_id: str, user: CurrentUser, state: State) -> LLMConfig:
    return _view(state.llm_configs, await state.llm_configs.set_default(user.user_id, config_id))


@router.get("/{config_id}", response_model=LLMConfig, responses=_NOT_FOUND)
async def get_llm_config(config_id: str, user: CurrentUser, state: State) -> LLMConfig:
    return _view(state.llm_configs, await state.llm_configs.get(user.user_id, config_id))


@router.put("/{config_id}", response_model=LLMConfig, responses={**_NOT_FOUND, **_INVALID})
async def update_llm_config(config_id: str, body: LLMConfigUpdate, user: CurrentUser, state: State) -> LLMConfig:
    """Change some fields (null removes one); the stored API key is kept unless api_key is given."""
    record = await state.llm_configs.update(
        user.user_id, config_id, _object(body.config), approve=partial(state.check_endpoint, user)
    )
    return _view(state.llm_configs, record)


@router.delete("/{config_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_NOT_FOUND)
async def delete_llm_config(config_id: str, user: CurrentUser, state: State) -> None:
    await state.llm_configs.delete(user.user_id, config_id)
