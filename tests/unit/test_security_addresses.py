"""IPv6 addresses that carry an IPv4 address are judged by it, by the one classifier that both the
outbound policy and the model-server traits use (the route itself: ``test_security_secrets.py``)."""

from __future__ import annotations

import ipaddress

import pytest

from gns3server.agent.gns3_copilot.addresses import carried_ipv4, describe, is_public, parse_address
from gns3server.agent.gns3_copilot.agent.server.kind import server_kind
from gns3server.agent.gns3_copilot.agent.server.local import is_local_host
from gns3server.agent.gns3_copilot.api.endpoints import EndpointNotAllowedError, EndpointPolicy

pytestmark = pytest.mark.security

# (address, the IPv4 address it carries): each carries an internal address, so none is public.
HIDING = [
    ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64, well-known prefix
    ("64:ff9b::a00:1", "10.0.0.1"),
    ("64:ff9b:1::a00:1", "10.0.0.1"),  # NAT64, local-use prefix (RFC 8215), /96 placement
    ("64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254"),  # the same prefix, /48 placement: the metadata address
    ("2002:7f00:1::", "127.0.0.1"),  # 6to4
    ("2002:a00:1::", "10.0.0.1"),
    ("::127.0.0.1", "127.0.0.1"),  # IPv4-compatible
    ("::ffff:0:7f00:1", "127.0.0.1"),  # IPv4-translated
    ("::ffff:10.0.0.1", "10.0.0.1"),  # IPv4-mapped
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "10.0.0.1"),  # Teredo: its client (bits inverted)
]
# Public IPv4 addresses carried the same ways are public.
CARRYING_PUBLIC = ["64:ff9b::5db8:d822", "2002:5db8:d822::1", "::ffff:93.184.216.34", "::ffff:0:5db8:d822"]


@pytest.mark.parametrize(("text", "ipv4"), HIDING)
def test_an_address_carrying_an_internal_ipv4_address_is_not_public(text: str, ipv4: str) -> None:
    address = parse_address(text)
    assert ipaddress.IPv4Address(ipv4) in carried_ipv4(address)
    assert not is_public(address)
    if address.ipv4_mapped is None:  # (a mapped address is refused as its IPv4 address itself)
        assert "carrying" in describe(address)
    assert is_local_host(f"[{text}]")  # the model-server traits judge it the same way
    assert server_kind({"base_url": f"http://[{text}]:8080/v1"}).one_slot  # and so the one server-kind classifier


@pytest.mark.parametrize("text", CARRYING_PUBLIC)
def test_an_address_carrying_a_public_ipv4_address_is_public(text: str) -> None:
    assert is_public(parse_address(text))
    assert not is_local_host(f"[{text}]")
    assert not server_kind({"base_url": f"https://[{text}]/v1"}).one_slot


@pytest.mark.parametrize(
    ("text", "why"),
    [("fec0::1", "site-local"), ("::", "unspecified"), ("::1", "loopback"), ("fe80::1", "link-local"),
     ("fd00::1", "private"), ("ff02::1", "multicast"), ("2001:db8::1", "private"), ("100::1", "")],
)
def test_internal_ipv6_space_is_not_public(text: str, why: str) -> None:
    address = parse_address(text)
    assert not is_public(address) and why in describe(address)


def test_public_addresses_stay_public() -> None:
    for text in ["93.184.216.34", "2606:4700::6810:84e5", "[2a00:1450:4007:80e::200e]", "1.1.1.1"]:
        assert is_public(parse_address(text)), text


class DNS:
    async def __call__(self, host: str, port: int) -> list[str]:
        return {"nat64.example": ["64:ff9b::a9fe:a9fe"], "sixtofour.example": ["2002:c0a8:101::1"]}[host]


@pytest.mark.parametrize(
    "url",
    ["https://[64:ff9b::7f00:1]/v1", "https://[64:ff9b::a00:1]/v1", "https://[64:ff9b:1::a00:1]/v1",
     "https://[2002:7f00:1::]/v1", "https://[2002:a00:1::]/v1", "https://[::127.0.0.1]/v1",
     "https://[::ffff:0:7f00:1]/v1", "https://[fec0::1]/v1", "https://[::ffff:10.0.0.1]/v1",
     "https://nat64.example/v1", "https://sixtofour.example/v1"],
)
async def test_the_outbound_policy_refuses_them_for_ordinary_users(url: str) -> None:
    policy = EndpointPolicy.parse("public")
    with pytest.raises(EndpointNotAllowedError, match="not public|carrying|site-local|private|loopback") as caught:
        await policy.check({"base_url": url}, is_superadmin=False, resolve=DNS())
    assert "user_llm_endpoints" in str(caught.value)
    await policy.check({"base_url": url}, is_superadmin=True, resolve=DNS())  # the administrator's choice


async def test_a_listed_network_still_admits_the_mapped_form_of_its_addresses() -> None:
    policy = EndpointPolicy.parse("10.0.0.0/8")
    await policy.check({"base_url": "http://[::ffff:10.1.2.3]:11434/v1"}, is_superadmin=False, resolve=DNS())
    with pytest.raises(EndpointNotAllowedError):
        await policy.check({"base_url": "http://[64:ff9b::a01:203]:11434/v1"}, is_superadmin=False, resolve=DNS())
