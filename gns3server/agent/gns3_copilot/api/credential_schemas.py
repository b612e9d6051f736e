"""Request and answer bodies of the console-credentials routes (``routes/console_credentials.py``).

What is set is a secret: a body carries it in, an answer never carries it out (the
username masked, the passwords as flags only).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ConsoleCredentialsSet(BaseModel):
    """What a node's (or a template's) console login and enable mode ask for."""

    model_config = ConfigDict(extra="forbid")

    username: str | None = Field(None, min_length=1, max_length=128, description="Typed at login: / Username:")
    password: str | None = Field(None, min_length=1, max_length=256, description="Typed at Password: (never returned)")
    enable_password: str | None = Field(
        None, min_length=1, max_length=256, description="Typed when enable asks for a password (never returned)"
    )

    @field_validator("username", "password", "enable_password")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        # A line break would be typed as Enter, then the rest as another line.
        if value is not None and _CONTROL.search(value):
            raise ValueError("must not hold control characters (line breaks, tabs ...)")
        return value

    @model_validator(mode="after")
    def _something(self) -> ConsoleCredentialsSet:
        if not (self.username or self.password or self.enable_password):
            raise ValueError("give a username, a password or an enable_password")
        return self


class ConsoleCredentials(BaseModel):
    """What is set for a node or a template, as it may be shown."""

    scope: str = Field(..., description="node or template")
    scope_id: str = Field(..., description="The node's or the template's id")
    project_id: str = Field("", description="The node's project (empty for a template)")
    username: str = Field("", description="The username, masked (its first character)")
    password_set: bool
    enable_password_set: bool
    set_by: str = Field(..., description="GNS3 username who set them")
    updated_at: float = Field(..., description="Seconds since the epoch (UTC)")
