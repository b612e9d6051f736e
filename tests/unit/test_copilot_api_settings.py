"""The API layer's pure parts: [Copilot] settings, the key file and cipher, SSE encoding."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path
from typing import get_args

import pytest

from gns3server.agent.gns3_copilot.agent.policies.modes import MODES
from gns3server.agent.gns3_copilot.api.crypto import KEY_FILE_NAME, SecretBox, load_or_create_key
from gns3server.agent.gns3_copilot.api.errors import StoredKeyUnreadableError
from gns3server.agent.gns3_copilot.api.schemas import Mode
from gns3server.agent.gns3_copilot.api.settings import (
    SettingsError,
    environment_values,
    load_settings,
    local_server_url,
    read_copilot_section,
)
from gns3server.agent.gns3_copilot.api.sse import encode, wire_event
from gns3server.agent.gns3_copilot.api.state import COMPAT_MODES


def settings(values: dict[str, str], **overrides):
    options = {"gns3_config_dir": "/srv/gns3", "gns3_secrets_dir": None, "host": "0.0.0.0", "port": 3080, "ssl": False}
    return load_settings(values, **{**options, **overrides})


def test_defaults_live_under_the_gns3_config_dir():
    result = settings({})
    assert result.data_dir == Path("/srv/gns3/copilot") and result.secrets_dir == Path("/srv/gns3")
    assert result.server_url == "http://127.0.0.1:3080" and result.verify_tls
    assert result.modes == ("teaching", "lab_automation") and result.default_mode == "lab_automation"
    assert result.default_llm_config is None and result.heartbeat_seconds == 15.0


def test_console_policy_path():
    assert settings({}).console_policy is None
    assert settings({"console_policy": " /etc/gns3/policy.toml "}).console_policy == Path("/etc/gns3/policy.toml")


def test_approvals_expire_after_ten_minutes_unless_configured():
    assert settings({}).approval_seconds == 600.0
    assert settings({"approval_minutes": "2.5"}).approval_seconds == 150.0
    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(SettingsError, match="approval_minutes"):
            settings({"approval_minutes": bad})


def test_file_keys_and_environment(tmp_path: Path):
    config = tmp_path / "gns3_server.conf"
    config.write_text("[Server]\nport = 1\n[Copilot]\nmodes = teaching\nllm_model = qwen\nllm_context_limit = 32\n"
                      "llm_temperature = 0.2\n")
    values = {**read_copilot_section([config]),
              **environment_values({"GNS3_COPILOT_LLM_API_KEY": "sk-env", "GNS3_COPILOT_HEARTBEAT_SECONDS": "0.5",
                                    "OTHER": "x"})}
    result = settings(values, gns3_secrets_dir="/keys")
    assert result.modes == ("teaching",) and result.default_mode == "teaching"
    assert result.heartbeat_seconds == 0.5 and result.secrets_dir == Path("/keys")
    llm = result.default_llm_config
    assert llm is not None and llm["model"] == "qwen" and llm["context_limit"] == 32 and llm["temperature"] == 0.2
    assert llm["api_key"] == "sk-env" and llm["provider"] == "openai"  # schema defaults filled in
    assert "sk-env" not in repr(result)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"modes": "teaching, flying"}, "modes"),
        ({"modes": "teaching", "default_mode": "lab_automation"}, "default_mode"),
        ({"heartbeat_seconds": "0"}, "heartbeat_seconds"),
        ({"max_llm_calls": "many"}, "max_llm_calls"),
        ({"llm_model": "m"}, "llm_context_limit"),
        ({"llm_model": "m", "llm_context_limit": "lots"}, "llm_context_limit"),
        ({"llm_model": "m", "llm_context_limit": "8", "llm_colour": "red"}, "llm_colour"),
    ],
)
def test_bad_settings_name_the_key_never_the_secret(values, named):
    with pytest.raises(SettingsError, match=named) as caught:
        settings({**values, "llm_api_key": "sk-do-not-show"} if "llm_model" in values else values)
    assert "sk-do-not-show" not in str(caught.value)


def test_server_url_for_wildcard_and_ipv6_binds():
    assert local_server_url("0.0.0.0", 80, False) == "http://127.0.0.1:80"
    assert local_server_url("::", 80, True) == "https://[::1]:80"
    assert local_server_url("10.0.0.5", 80, False) == "http://10.0.0.5:80"
    ssl = settings({}, ssl=True)
    assert ssl.server_url.startswith("https://") and not ssl.verify_tls
    explicit = settings({"server_url": "https://gns3.example/"}, ssl=True)
    assert explicit.server_url == "https://gns3.example" and explicit.verify_tls


def test_key_file_is_private_stable_and_repaired(tmp_path: Path):
    key = load_or_create_key(tmp_path / "secrets")
    path = tmp_path / "secrets" / KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(tmp_path / "secrets") == key
    path.chmod(0o644)
    assert load_or_create_key(tmp_path / "secrets") == key and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE_NAME]  # no temporary file left


def test_secret_box_round_trip_and_foreign_key(tmp_path: Path):
    box = SecretBox(load_or_create_key(tmp_path / "a"))
    token = box.encrypt("sk-secret")
    assert "sk-secret" not in token and box.decrypt(token) == "sk-secret"
    other = SecretBox(load_or_create_key(tmp_path / "b"))
    with pytest.raises(StoredKeyUnreadableError):
        other.decrypt(token)


def test_events_on_the_wire_carry_gns3_3_1_names():
    call = wire_event({"type": "tool_call", "tool_call_id": "c1", "name": "gns3_topology", "args": {"a": 1}})
    assert call["tool_call"] == {"id": "c1", "type": "function",
                                 "function": {"name": "gns3_topology", "arguments": '{"a": 1}'}}
    end = wire_event({"type": "tool_end", "tool_call_id": "c1", "name": "n", "output": "o", "status": "success"})
    assert end["tool_name"] == "n" and end["tool_output"] == "o"
    assert wire_event({"type": "error", "message": "m", "code": "c"})["error"] == "m"
    raw = encode({"type": "content", "content": "line\nbreak é"})
    assert raw.startswith(b"data: ") and raw.endswith(b"\n\n") and raw.count(b"\n") == 2
    assert json.loads(raw[len(b"data: "):])["content"] == "line\nbreak é"


def test_the_api_accepts_exactly_the_agents_modes_and_the_compatible_ones():
    assert set(get_args(Mode)) == set(MODES) | COMPAT_MODES


def test_environment_variables_of_our_scripts_are_not_settings(caplog):
    environ = {"GNS3_COPILOT_HOME": "/srv/gns3", "GNS3_COPILOT_CACHE": "/var/cache", "GNS3_COPILOT_HEARTBEAT_SECONDS": "2",
               "GNS3_COPILOT_LLM_MODEL": "m", "OTHER": "x"}
    values = environment_values(environ)
    assert values == {"heartbeat_seconds": "2", "llm_model": "m"}
    with caplog.at_level(logging.WARNING):
        settings({**values, "llm_context_limit": "8"})
    assert "Ignoring unknown setting" not in caplog.text
    with caplog.at_level(logging.WARNING):  # a key in the config file is still checked
        settings({"heartbeat_secs": "2"})
    assert "Ignoring unknown setting [Copilot] heartbeat_secs" in caplog.text
