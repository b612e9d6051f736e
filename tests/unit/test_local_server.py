"""Which model servers are the lab's own (one slot: summaries never beside a question there)."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.agent.model.config import LLMConfigError, validate_llm_config
from gns3server.agent.gns3_copilot.agent.server.kind import one_slot_server
from gns3server.agent.gns3_copilot.agent.server.local import is_local_host


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1", "localhost", "LOCALHOST.", "[::1]", "10.1.2.3", "192.168.1.20", "172.16.0.5",
        "169.254.10.1", "100.64.0.9", "fe80::1%eth0", "[fd00::5]", "llama", "gpu-box", "ollama.local",
        "lab.lan", "models.internal", "pc1.home.arpa", "x.localhost", "srv.localdomain",
    ],
)
def test_hosts_of_the_local_network_are_local(host):
    assert is_local_host(host)


@pytest.mark.parametrize(
    "host",
    ["api.openai.com", "api.deepseek.com", "openrouter.ai", "8.8.8.8", "[2001:4860:4860::8888]", "local.example.com", ""],
)
def test_public_hosts_are_not(host):
    assert not is_local_host(host)


def test_the_config_decides_and_its_host_is_the_guess():
    local, cloud = "http://127.0.0.1:8080/v1", "https://api.deepseek.com/v1"
    assert one_slot_server({"base_url": local}) == local
    assert one_slot_server({"base_url": cloud}) is None
    assert one_slot_server({"base_url": cloud, "local_server": True}) == cloud  # a LAN name that looks public
    assert one_slot_server({"base_url": local, "local_server": False}) is None  # a local proxy to a cloud
    assert one_slot_server({"provider": "ollama", "base_url": "http://gpu-box:11434"}) == "http://gpu-box:11434"
    assert one_slot_server({"model": "gpt-4o-mini"}) is None  # the provider's own API


def test_local_server_must_be_a_boolean():
    config = {"model": "m", "context_limit": 8, "base_url": "http://127.0.0.1:8080/v1"}
    assert validate_llm_config({**config, "local_server": False})["local_server"] is False
    with pytest.raises(LLMConfigError, match=r"^local_server: must be true or false$"):
        validate_llm_config({**config, "local_server": "yes"})
