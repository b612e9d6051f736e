"""The ``user_llm_endpoints`` policy: what an ordinary user's config may make the server call.

Name resolution is a fake here (a dict, changed between calls to play DNS
rebinding); the real resolver is used through the real server in
``tests/integration/test_security_secrets.py``.
"""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.api.endpoints import EndpointNotAllowedError, EndpointPolicy, resolve_host
from gns3server.agent.gns3_copilot.api.errors import http_status
from gns3server.agent.gns3_copilot.api.settings import SettingsError, load_settings

pytestmark = pytest.mark.security


class FakeDNS:
    def __init__(self, **names: list[str]) -> None:
        self.names = {k.replace("_", "."): v for k, v in names.items()}
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        if host not in self.names:
            raise OSError(f"no such host {host}")
        return self.names[host]


DNS = FakeDNS(
    api_example=["93.184.216.34"],
    dual_example=["93.184.216.34", "10.0.0.5"],
    inside_example=["192.168.7.7"],
    v6_example=["2606:4700::6810:84e5"],
)


async def allowed(policy: EndpointPolicy, url: str | None, *, admin: bool = False, provider: str = "openai") -> bool:
    config = {"provider": provider, **({"base_url": url} if url else {})}
    try:
        await policy.check(config, is_superadmin=admin, resolve=DNS)
    except EndpointNotAllowedError as exc:
        assert http_status(exc) == 403 and ("user_llm_endpoints" in str(exc) or "cannot be checked" in str(exc))
        return False
    return True


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (None, True),  # the provider's own public API
        ("https://api.example/v1", True),
        ("https://v6.example/v1", True),
        ("https://93.184.216.34/v1", True),
        ("http://api.example/v1", False),  # public, but the conversation and key in clear text
        ("https://dual.example/v1", False),  # one private address is enough to refuse
        ("https://inside.example/v1", False),
        ("https://unknown.example/v1", False),  # cannot be judged
        ("http://127.0.0.1:11434/v1", False),
        ("https://127.0.0.2/v1", False),
        ("http://[::1]:8000/v1", False),
        ("http://[::ffff:10.0.0.1]/v1", False),
        ("http://[fe80::1%25eth0]/v1", False),
        ("http://169.254.169.254/latest", False),
        ("http://100.64.0.1/v1", False),  # carrier-grade NAT: not public
        ("http://0.0.0.0/v1", False),
        ("http://224.0.0.1/v1", False),
    ],
)
async def test_the_default_policy_allows_public_https_only(url, expected):
    assert await allowed(EndpointPolicy.parse(""), url) is expected


async def test_native_ollama_without_base_url_is_the_servers_localhost():
    policy = EndpointPolicy.parse(None)
    assert await allowed(policy, None, provider="ollama") is False
    assert await allowed(EndpointPolicy.parse("public, localhost"), None, provider="ollama") is True


async def test_superadmins_and_star_allow_anything():
    assert await allowed(EndpointPolicy.parse(""), "http://127.0.0.1:1/v1", admin=True)
    assert await allowed(EndpointPolicy.parse("*"), "http://169.254.169.254/")


async def test_listed_names_addresses_and_networks():
    policy = EndpointPolicy.parse("public, 10.0.0.0/8, 127.0.0.1, inside.example, *.lab.example")
    assert await allowed(policy, "http://127.0.0.1:8000/v1")
    assert not await allowed(policy, "http://127.0.0.2:8000/v1")
    assert await allowed(policy, "http://10.9.8.7/v1")
    assert await allowed(policy, "http://inside.example/v1")  # a listed name: the admin's choice
    assert await allowed(policy, "http://ollama.lab.example/v1")  # wildcard, no resolution needed
    assert not await allowed(policy, "http://lab.example.evil/v1")
    assert not await allowed(policy, "https://dual.example/v1")  # 10.0.0.5 listed, 93.x public: not all listed
    assert await allowed(policy, "https://api.example/v1")


async def test_without_public_only_the_list_is_allowed():
    policy = EndpointPolicy.parse("10.0.0.0/8")
    assert not await allowed(policy, "https://api.example/v1")
    assert not await allowed(policy, None)  # no base_url: the provider's public API, not listed
    assert await allowed(policy, "http://10.1.1.1/v1")


async def test_a_name_that_rebinds_is_refused_at_use():
    """Judged each time: allowed when saved, refused once the name points inside."""
    dns = FakeDNS(rebind_example=["93.184.216.34"])
    policy = EndpointPolicy.parse("")
    config = {"provider": "openai", "base_url": "https://rebind.example/v1"}
    await policy.check(config, is_superadmin=False, resolve=dns)
    dns.names["rebind.example"] = ["127.0.0.1"]
    with pytest.raises(EndpointNotAllowedError, match="resolves to a loopback address"):
        await policy.check(config, is_superadmin=False, resolve=dns)
    assert dns.asked == [("rebind.example", 443), ("rebind.example", 443)]


@pytest.mark.parametrize("text", ["10.0.0.0/33", "not a host!", "http://x", "10.0.0.1/8/1"])
def test_bad_entries_are_settings_errors_naming_the_key(text):
    with pytest.raises(SettingsError, match="user_llm_endpoints"):
        load_settings({"user_llm_endpoints": text}, gns3_config_dir="/tmp", gns3_secrets_dir=None,
                      host="127.0.0.1", port=3080, ssl=False)


def test_the_setting_reaches_the_settings():
    settings = load_settings({"user_llm_endpoints": "public, 10.0.0.0/8"}, gns3_config_dir="/tmp",
                             gns3_secrets_dir=None, host="127.0.0.1", port=3080, ssl=False)
    assert settings.user_llm_endpoints.public and len(settings.user_llm_endpoints.networks) == 1
    default = load_settings({}, gns3_config_dir="/tmp", gns3_secrets_dir=None, host="127.0.0.1", port=3080, ssl=False)
    assert default.user_llm_endpoints == EndpointPolicy(public=True)


async def test_the_real_resolver_runs_off_the_loop_and_finds_loopback():
    assert "127.0.0.1" in await resolve_host("localhost", 80)
