"""GNS3 3.1's face of the LLM config store: owners, shapes and the default chosen for a user.

GNS3 3.1 keeps LLM model configs per user and per user group
(``/v3/access/users/{id}/llm-model-configs``, ``/v3/access/groups/{id}/...``);
we keep every config in one encrypted store (:mod:`.llm_config_store`), keyed by an
owner string. A user's configs are owned by their user id, a group's by
``group:<group id>``, so ``/v3/copilot/llm-configs`` and the 3.1 routes read and
write the same records. 3.1's table-level fields (``name``, ``model_type``) and
``copilot_mode`` live in the config itself, checked by the same schema.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..agent.model.config import LLMConfigError
from .errors import ConfigVersionConflictError, LLMConfigNotFoundError
from .llm_config_store import LLMConfigRecord, LLMConfigStore
from .schemas31 import LLMModelConfig, LLMModelConfigWithSource

GROUP_OWNER_PREFIX = "group:"
SERVER_DEFAULT_ID = "server-default"
"""The stable id of the server-wide default config (from the server's config file): read-only,
listed last, the default when neither the user nor a group of theirs has one."""
TABLE_FIELDS = ("name", "model_type", "is_default", "expected_version")
"""3.1 request fields that are not config fields (``name``/``model_type`` are stored in the config)."""
DEFAULT_MODEL_TYPE = "text"
GroupIdsOf = Callable[[], Awaitable[Sequence[str]]]
"""The GNS3 user groups of a user, asked for only when the user's own configs do not decide (reading
them is a query of GNS3's database): :class:`.dependencies.Memberships` for a request."""


async def no_groups() -> Sequence[str]:
    """A user of no group (a caller that has no memberships to offer)."""
    return ()


def group_owner(group_id: str) -> str:
    return GROUP_OWNER_PREFIX + str(group_id)


def version_of(record: LLMConfigRecord) -> int:
    """3.1's optimistic-lock ``version``: the last change's time in milliseconds, so it changes
    with every update (3.1 counts updates; a client only compares it for equality)."""
    return int(record.updated_at * 1000)


def _naive_utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC).replace(tzinfo=None)


def view(record: LLMConfigRecord, *, user_id: str | None, group_id: str | None) -> dict[str, Any]:
    """The record in 3.1's response shape; the key is write-only (``api_key`` is always null)."""
    config = {k: v for k, v in record.config.items() if k not in ("name", "model_type")}
    config.setdefault("provider", "openai")
    config.setdefault("base_url", "")
    config["api_key"] = None
    return {
        "config_id": record.config_id,
        "name": str(record.config.get("name") or record.config.get("model")),
        "model_type": record.config.get("model_type") or DEFAULT_MODEL_TYPE,
        "config": config,
        "user_id": user_id,
        "group_id": group_id,
        "is_default": record.is_default,
        "version": version_of(record),
        "has_api_key": record.has_api_key,
        "created_at": _naive_utc(record.created_at),
        "updated_at": _naive_utc(record.updated_at),
    }


def user_view(record: LLMConfigRecord, user_id: str) -> LLMModelConfig:
    return LLMModelConfig.model_validate(view(record, user_id=user_id, group_id=None))


def group_view(record: LLMConfigRecord, group_id: str) -> LLMModelConfig:
    return LLMModelConfig.model_validate(view(record, user_id=None, group_id=group_id))


def config_fields(body: Mapping[str, Any], *, creating: bool) -> dict[str, Any]:
    """The config part of a 3.1 create/update body, for the store.

    3.1 ignores null fields in an update (and an empty ``api_key`` means "keep
    it" in its forms); on create, nulls are simply absent. ``name`` and
    ``model_type`` are kept in the config.
    """
    fields: dict[str, Any] = {}
    for name, value in body.items():
        if name in ("is_default", "expected_version") or value is None:
            continue
        if name == "api_key" and value == "":
            continue
        fields[name] = value
    if creating:
        fields.setdefault("model_type", DEFAULT_MODEL_TYPE)
    return fields


def check_version(record: LLMConfigRecord, expected: Any) -> None:
    """3.1's optimistic locking: ``expected_version`` must be the record's current version."""
    if expected is None:
        return
    if not isinstance(expected, int) or isinstance(expected, bool):
        raise LLMConfigError("expected_version", "type", "must be an integer (the config's version)")
    if expected != version_of(record):
        raise ConfigVersionConflictError(
            f"Concurrent modification of LLM model configuration {record.config_id}: "
            f"version {expected} expected, it is {version_of(record)}"
        )


def server_view(config: Mapping[str, Any], *, is_default: bool) -> LLMModelConfigWithSource:
    """The server-wide default in 3.1's shape, under :data:`SERVER_DEFAULT_ID` (``source: "server"``).

    Read-only (the administrator sets it in the server's config file); its key,
    like every key, is never returned. Its ``version`` is 0: it cannot be updated here.
    """
    shown = {k: v for k, v in config.items() if k not in ("name", "model_type")}
    shown.setdefault("provider", "openai")
    shown.setdefault("base_url", "")
    shown["api_key"] = None
    return LLMModelConfigWithSource(
        config_id=SERVER_DEFAULT_ID, name=str(config.get("name") or config.get("model") or "Server default"),
        model_type=str(config.get("model_type") or DEFAULT_MODEL_TYPE), config=shown, user_id=None, group_id=None,
        is_default=is_default, version=0, has_api_key=bool(config.get("api_key")), source="server",
    )


async def effective_configs(
    store: LLMConfigStore, user_id: str, groups: Sequence[tuple[str, str]], server: Mapping[str, Any] | None = None,
) -> tuple[list[LLMModelConfigWithSource], LLMModelConfigWithSource | None]:
    """A user's own configs, those inherited from their groups (``(group id, name)``), then the
    server's (``server``, if any), and the default: the user's own default, else the first group
    default (3.1's order), else the server's."""
    configs: list[LLMModelConfigWithSource] = []
    for record in await store.list(user_id):
        configs.append(LLMModelConfigWithSource(**view(record, user_id=user_id, group_id=None), source="user"))
    for group_id, group_name in groups:
        for record in await store.list(group_owner(group_id)):
            configs.append(
                LLMModelConfigWithSource(
                    **view(record, user_id=None, group_id=group_id), source="group", group_name=group_name
                )
            )
    default = next((c for c in configs if c.is_default and c.source == "user"), None)
    if default is None:
        default = next((c for c in configs if c.is_default and c.source == "group"), None)
    if server is not None:
        configs.append(server_view(server, is_default=default is None))
        if default is None:
            default = configs[-1]
    return configs, default


async def default_record(store: LLMConfigStore, user_id: str, groups: GroupIdsOf) -> LLMConfigRecord | None:
    """The config a user's chat uses when it names none: their default, else a group's default.
    ``groups`` is awaited only when the user has no default of their own."""
    record = await store.default(user_id)
    if record is not None:
        return record
    for group_id in await groups():
        record = await store.default(group_owner(group_id))
        if record is not None:
            return record
    return None


async def named_record(store: LLMConfigStore, user_id: str, groups: GroupIdsOf, config_id: str) -> LLMConfigRecord:
    """The user's own config, or one of their groups' (LLMConfigNotFoundError otherwise).
    ``groups`` is awaited only when the config is not the user's own."""
    with contextlib.suppress(LLMConfigNotFoundError):
        return await store.get(user_id, config_id)
    for group_id in await groups():
        with contextlib.suppress(LLMConfigNotFoundError):
            return await store.get(group_owner(group_id), config_id)
    raise LLMConfigNotFoundError(f"LLM config {config_id} not found")
