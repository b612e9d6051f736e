"""Response shapes of GNS3 3.1's LLM-model-config API (``/v3/access/.../llm-model-configs``).

Field names and meanings are 3.1's (``schemas/controller/llm_model_configs.py`` in
gns3-server 3.1.0a7); ``has_api_key`` is ours. Request bodies are plain objects
checked by the model factory's schema (see :mod:`.model_configs31`), so that a 422
never echoes an API key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class LLMModelConfig(BaseModel):
    """3.1's ``LLMModelConfigResponse``; ``config.api_key`` is always null (write-only)."""

    config_id: str
    name: str
    model_type: str
    config: dict[str, Any] = Field(..., description="provider, base_url, model, context_limit, copilot_mode, ...")
    user_id: str | None = None
    group_id: str | None = None
    is_default: bool
    version: int = Field(..., description="Changes on every update; send it back as expected_version")
    has_api_key: bool = Field(False, description="A key is stored (it is never returned)")
    created_at: datetime | None = None
    updated_at: datetime | None = None


class LLMModelConfigWithSource(LLMModelConfig):
    model_config = ConfigDict(extra="allow")

    source: str = Field(..., description="user or group")
    group_name: str | None = None


class LLMModelConfigInherited(BaseModel):
    """A user's own configs and those inherited from their groups, with the default in use."""

    configs: list[LLMModelConfigWithSource]
    default_config: LLMModelConfigWithSource | None = None
    total: int


class LLMModelConfigList(BaseModel):
    configs: list[LLMModelConfig]
    default_config: LLMModelConfig | None = None
    total: int
