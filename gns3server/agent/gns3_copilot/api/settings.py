"""Copilot settings: the ``[Copilot]`` section of the server's config file, and env vars.

Every key may also come from an environment variable ``GNS3_COPILOT_<KEY>`` (upper
case), which wins over the file, so a key need not be written in a config file::

    [Copilot]
    ; where conversations and LLM configs live (default: <GNS3 config dir>/copilot)
    data_dir = /var/lib/gns3/copilot
    ; modes users may pick, and the one used when a request names none
    modes = teaching, lab_automation
    default_mode = lab_automation
    ; the server-wide default LLM config: llm_<field> for each field of the schema
    llm_model = qwen2.5:14b
    llm_base_url = http://127.0.0.1:11434/v1
    llm_context_limit = 32
    ; how long a request to approve device changes stays usable
    approval_minutes = 10
    ; GNS3_COPILOT_LLM_API_KEY=... in the environment rather than here
    ; LLM endpoints ordinary users may use (default: public https endpoints)
    user_llm_endpoints = public, 10.1.0.0/16, ollama.lab.example
    ; system prompts an administrator edits (reloaded by POST /v3/copilot/reload/skills)
    prompts_dir = /etc/gns3/copilot-prompts

See ``docs/api.md`` for every key. :func:`load_settings` is pure (values in,
settings out) so that it can be tested without a server; :func:`read_copilot_section`
does the file I/O and is run in a thread.
"""

from __future__ import annotations

import configparser
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent.gns3_copilot import DEFAULT_MAX_LLM_CALLS
from ..agent.model.config import LLMConfigError, llm_config_schema, validate_llm_config
from ..agent.policies.modes import DEFAULT_MODE, MODES
from ..errors import CopilotError, ErrorKind
from ..service.copilot import HEARTBEAT_SECONDS
from ..tools.approval import DEFAULT_APPROVAL_SECONDS
from .endpoints import SETTING as ENDPOINTS_SETTING
from .endpoints import EndpointPolicy

log = logging.getLogger(__name__)

SECTION = "Copilot"
ENV_PREFIX = "GNS3_COPILOT_"
LLM_PREFIX = "llm_"
DATA_DIR_NAME = "copilot"
KNOWN_KEYS = frozenset(
    {
        "data_dir", "secrets_dir", "modes", "default_mode", "heartbeat_seconds", "max_llm_calls", "server_url",
        "console_policy", "approval_minutes", "user_llm_endpoints", "prompts_dir",
    }
)


class SettingsError(CopilotError, ValueError):
    """A ``[Copilot]`` setting that cannot be used; the message names the key, never a secret."""

    code = "settings_invalid"
    kind = ErrorKind.INVALID


@dataclass(frozen=True)
class CopilotSettings:
    """What the launcher needs to build the copilot's server-wide state."""

    data_dir: Path
    secrets_dir: Path
    server_url: str
    """How tools reach this very server's REST API (with the requesting user's token)."""
    verify_tls: bool = True
    modes: tuple[str, ...] = MODES
    default_mode: str = DEFAULT_MODE
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    max_llm_calls: int = DEFAULT_MAX_LLM_CALLS
    default_llm_config: Mapping[str, Any] | None = field(default=None, repr=False)
    """The server-wide default LLM config (validated), used when a user has none."""
    console_policy: Path | None = None
    """The administrator's device command policy file (None: the packaged default)."""
    approval_seconds: float = DEFAULT_APPROVAL_SECONDS
    """How long a request for approval of device changes stays usable (``approval_minutes``)."""
    user_llm_endpoints: EndpointPolicy = field(default_factory=EndpointPolicy)
    """The LLM endpoints ordinary users' configs may point at (see ``endpoints.py``)."""
    prompts_dir: Path | None = None
    """The administrator's prompt files (``system.md``, ``teaching.md``...; None: the packaged ones)."""


def read_copilot_section(config_files: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """The ``[Copilot]`` keys of the config files (later files win), blocking file I/O."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read([str(f) for f in config_files], encoding="utf-8")
    return dict(parser.items(SECTION)) if parser.has_section(SECTION) else {}


def environment_values(environ: Mapping[str, str]) -> dict[str, str]:
    """``GNS3_COPILOT_*`` variables as ``[Copilot]`` keys (``GNS3_COPILOT_LLM_API_KEY`` -> ``llm_api_key``).

    Only those naming a setting: the others (``GNS3_COPILOT_HOME``, ``GNS3_COPILOT_CACHE`` ...)
    belong to our scripts, not to the server, and are no mistake to warn about.
    """
    values = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key in KNOWN_KEYS or key.startswith(LLM_PREFIX):
            values[key] = value
        else:
            log.debug("%s is not a [%s] setting; left to the scripts that use it", name, SECTION)
    return values


def _coerce(field_name: str, raw: str, prop: Mapping[str, Any]) -> Any:
    """A config-file string as the JSON type the LLM schema expects for ``field_name``."""
    kind = prop.get("type")
    text = raw.strip()
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        raise SettingsError(f"[{SECTION}] {LLM_PREFIX}{field_name}: {prop.get('x-message', 'has the wrong type')}") from None
    return text


def _llm_config(values: Mapping[str, str]) -> dict[str, Any] | None:
    properties = llm_config_schema()["properties"]
    config: dict[str, Any] = {}
    for key, raw in values.items():
        if not key.startswith(LLM_PREFIX):
            continue
        name = key[len(LLM_PREFIX) :]
        if name not in properties:
            raise SettingsError(f"[{SECTION}] {key}: unknown LLM config field (allowed: {', '.join(properties)})")
        if raw.strip():
            config[name] = _coerce(name, raw, properties[name])
    if not config:
        return None
    try:
        return validate_llm_config(config)
    except LLMConfigError as exc:  # names the field, never its value
        where = f"{LLM_PREFIX}{exc.field}" if exc.field else "llm_* (the default LLM config)"
        raise SettingsError(f"[{SECTION}] {where}: {exc.errors[0][2]}") from None


def _number(values: Mapping[str, str], key: str, default: float, kind: type[int | float]) -> Any:
    raw = values.get(key, "").strip()
    if not raw:
        return default
    try:
        number = kind(raw)
    except ValueError:
        raise SettingsError(f"[{SECTION}] {key}: must be a number greater than 0") from None
    if not math.isfinite(number) or number <= 0:
        raise SettingsError(f"[{SECTION}] {key}: must be a number greater than 0")
    return number


def _modes(values: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    raw = values.get("modes", "")
    modes = tuple(m.strip() for m in raw.split(",") if m.strip()) or MODES
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SettingsError(f"[{SECTION}] modes: unknown mode(s) {', '.join(unknown)} (known: {', '.join(MODES)})")
    default = values.get("default_mode", "").strip() or (DEFAULT_MODE if DEFAULT_MODE in modes else modes[0])
    if default not in modes:
        raise SettingsError(f"[{SECTION}] default_mode: must be one of the allowed modes ({', '.join(modes)})")
    return modes, default


def local_server_url(host: str, port: int, ssl: bool) -> str:
    """This server as seen from itself: a wildcard bind address becomes loopback."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{'https' if ssl else 'http'}://{host}:{port}"


def load_settings(
    values: Mapping[str, str],
    *,
    gns3_config_dir: str | os.PathLike[str],
    gns3_secrets_dir: str | os.PathLike[str] | None,
    host: str,
    port: int,
    ssl: bool,
) -> CopilotSettings:
    """Build the settings from merged ``[Copilot]`` values (file, then environment)."""
    unknown = sorted(k for k in values if k not in KNOWN_KEYS and not k.startswith(LLM_PREFIX))
    for key in unknown:
        log.warning("Ignoring unknown setting [%s] %s", SECTION, key)
    config_dir = Path(gns3_config_dir).expanduser()
    data_dir = Path(values.get("data_dir", "").strip() or config_dir / DATA_DIR_NAME).expanduser()
    secrets_dir = Path(values.get("secrets_dir", "").strip() or gns3_secrets_dir or config_dir).expanduser()
    explicit_url = values.get("server_url", "").strip().rstrip("/")
    modes, default_mode = _modes(values)
    return CopilotSettings(
        data_dir=data_dir,
        secrets_dir=secrets_dir,
        server_url=explicit_url or local_server_url(host, port, ssl),
        # The default URL is this process on loopback: its own certificate needs no check.
        verify_tls=bool(explicit_url) or not ssl,
        modes=modes,
        default_mode=default_mode,
        heartbeat_seconds=_number(values, "heartbeat_seconds", HEARTBEAT_SECONDS, float),
        max_llm_calls=_number(values, "max_llm_calls", DEFAULT_MAX_LLM_CALLS, int),
        default_llm_config=_llm_config(values),
        console_policy=_path(values, "console_policy"),
        approval_seconds=_approval_seconds(values),
        user_llm_endpoints=_endpoints(values),
        prompts_dir=_path(values, "prompts_dir"),
    )


def _approval_seconds(values: Mapping[str, str]) -> float:
    """``approval_minutes`` as seconds: finite and greater than 0 (an approval must expire)."""
    minutes = _number(values, "approval_minutes", DEFAULT_APPROVAL_SECONDS / 60, float)
    if not math.isfinite(minutes):
        raise SettingsError(f"[{SECTION}] approval_minutes: must be a finite number of minutes greater than 0")
    return 60.0 * minutes


def _endpoints(values: Mapping[str, str]) -> EndpointPolicy:
    try:
        return EndpointPolicy.parse(values.get(ENDPOINTS_SETTING))
    except ValueError as exc:
        raise SettingsError(f"[{SECTION}] {ENDPOINTS_SETTING}: {exc}") from None


def _path(values: Mapping[str, str], key: str) -> Path | None:
    """An optional path setting (blank: not set)."""
    text = values.get(key, "").strip()
    return Path(text).expanduser() if text else None


def settings_from_gns3(environ: Mapping[str, str] | None = None) -> CopilotSettings:
    """Settings for the running gns3-server (its Config singleton is loaded by then). Blocking."""
    from gns3server.config import Config

    config = Config.instance()
    server = config.settings.Server
    values = {**read_copilot_section(config.get_config_files()), **environment_values(environ or os.environ)}
    return load_settings(
        values,
        gns3_config_dir=config.config_dir,
        gns3_secrets_dir=server.secrets_dir,
        host=server.host,
        port=server.port,
        ssl=server.enable_ssl,
    )
