"""The outbound policy's resolutions: kept while DNS says they hold, never longer, judged at every use.

DNS is a real one here: a UDP server on loopback answering from a zone the test
changes (dnspython builds its answers), asked by dnspython's resolver as the
copilot asks the system's. The system's resolver (``getaddrinfo``) stands in as a
counting function: the policy's addresses still come from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import dns.asyncresolver
import dns.message
import dns.name
import dns.rcode
import dns.rrset
import pytest

from gns3server.agent.gns3_copilot.api.endpoints import EndpointNotAllowedError, EndpointPolicy
from gns3server.agent.gns3_copilot.api.resolution import DnsLifetime, ResolutionCache

pytestmark = pytest.mark.security


class Zone(asyncio.DatagramProtocol):
    """A DNS server: ``records[(name, type)] = (ttl, [values])``; CNAMEs followed by the server."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], tuple[int, list[str]]] = {}
        self.soa_minimum = 60
        self.transport: Any = None
        self.questions = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # a datagram transport (the loop's own class: uvloop's is not asyncio's)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        name, rdtype = question.name.to_text(), dns.rdatatype.to_text(question.rdtype)
        self.questions += 1
        while (name, "CNAME") in self.records:
            ttl, (target,) = self.records[(name, "CNAME")]
            response.answer.append(dns.rrset.from_text(name, ttl, "IN", "CNAME", target))
            name = target
        if (name, rdtype) in self.records:
            ttl, values = self.records[(name, rdtype)]
            response.answer.append(dns.rrset.from_text(name, ttl, "IN", rdtype, *values))
        elif not any(n == name for n, _ in self.records):
            response.set_rcode(dns.rcode.NXDOMAIN)
        else:  # the name exists without this type: a negative answer, held for the SOA's minimum
            response.authority.append(dns.rrset.from_text(
                "test.", 3600, "IN", "SOA", f"ns.test. admin.test. 1 3600 600 86400 {self.soa_minimum}"))
        assert self.transport is not None
        self.transport.sendto(response.to_wire(), addr)


@contextlib.asynccontextmanager
async def dns_server() -> AsyncIterator[tuple[Zone, dns.asyncresolver.Resolver]]:
    loop = asyncio.get_running_loop()
    transport, zone = await loop.create_datagram_endpoint(Zone, local_addr=("127.0.0.1", 0))
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = transport.get_extra_info("sockname")[1]
    try:
        yield zone, resolver
    finally:
        transport.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class System:
    """``getaddrinfo`` as the zone answers it (what the policy judges), counted."""

    def __init__(self, zone: Zone) -> None:
        self.zone = zone
        self.asked = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked += 1
        name = host.rstrip(".") + "."
        while (name, "CNAME") in self.zone.records:
            name = self.zone.records[(name, "CNAME")][1][0]
        found = [v for t in ("A", "AAAA") for v in self.zone.records.get((name, t), (0, []))[1]]
        if not found:
            raise OSError(f"{host} does not resolve")
        return found


CONFIG = {"provider": "openai", "base_url": "https://llm.test/v1"}


async def test_dns_gives_the_shortest_ttl_of_the_answer_cnames_and_negative_answers_included():
    async with dns_server() as (zone, resolver):
        lifetime = DnsLifetime(resolver)
        zone.records[("llm.test.", "A")] = (300, ["93.184.216.34"])
        zone.records[("llm.test.", "AAAA")] = (120, ["2606:4700::6810:84e5"])
        assert await lifetime("llm.test") == (frozenset({"93.184.216.34", "2606:4700::6810:84e5"}), 120)
        zone.records.clear()
        zone.records[("alias.test.", "CNAME")] = (30, ["llm.test."])
        zone.records[("llm.test.", "A")] = (300, ["93.184.216.34"])
        assert await lifetime("alias.test") == (frozenset({"93.184.216.34"}), 30)  # no AAAA: held 60 s, the CNAME 30
        zone.soa_minimum = 5
        assert await lifetime("llm.test") == (frozenset({"93.184.216.34"}), 5)  # when an AAAA may appear
        assert await lifetime("missing.test") is None


async def test_a_resolution_is_kept_within_its_ttl_and_resolved_afresh_after_it():
    """The policy is judged at every use; the name is resolved again only once DNS's TTL has run out,
    and a rebinding after that is refused."""
    async with dns_server() as (zone, resolver):
        zone.records[("llm.test.", "A")] = (60, ["93.184.216.34"])
        system, clock = System(zone), Clock()
        cache = ResolutionCache(system, DnsLifetime(resolver), clock=clock)
        policy = EndpointPolicy.parse("")
        for _ in range(3):
            await policy.check(CONFIG, is_superadmin=False, resolve=cache)
            await cache.settled()
        assert system.asked == 1
        zone.records[("llm.test.", "A")] = (60, ["127.0.0.1"])  # rebinding, while the old answer still holds
        clock.now += 59.9
        await policy.check(CONFIG, is_superadmin=False, resolve=cache)
        assert system.asked == 1
        clock.now += 0.1  # the 60 s are over: never a moment longer
        with pytest.raises(EndpointNotAllowedError, match="resolves to a loopback address"):
            await policy.check(CONFIG, is_superadmin=False, resolve=cache)
        assert system.asked == 2


async def test_a_run_never_waits_for_dns_to_say_how_long_a_resolution_holds():
    """The TTL is asked in the background: a DNS that does not answer leaves the policy's resolution
    as fast as the system's resolver gives it (and nothing kept)."""
    async with dns_server() as (zone, resolver):
        zone.records[("llm.test.", "A")] = (600, ["93.184.216.34"])
        resolver.port = 9  # nothing answers there
        system = System(zone)
        cache = ResolutionCache(system, DnsLifetime(resolver, timeout=120), clock=Clock())
        try:
            for _ in range(2):  # the DNS question outlives the deadline by far: the resolutions do not
                assert await asyncio.wait_for(cache("llm.test", 443), 30) == ["93.184.216.34"]
            assert system.asked == 2
        finally:
            await cache.aclose()


async def test_the_policy_is_judged_at_use_on_a_kept_resolution():
    """A kept answer is the host's addresses, not a verdict: plain http to the same host is still refused."""
    async with dns_server() as (zone, resolver):
        zone.records[("llm.test.", "A")] = (600, ["93.184.216.34"])
        system = System(zone)
        cache = ResolutionCache(system, DnsLifetime(resolver), clock=Clock())
        policy = EndpointPolicy.parse("")
        await policy.check(CONFIG, is_superadmin=False, resolve=cache)
        await cache.settled()
        with pytest.raises(EndpointNotAllowedError, match="unencrypted"):
            await policy.check({**CONFIG, "base_url": "http://llm.test/v1"}, is_superadmin=False, resolve=cache)
        with pytest.raises(EndpointNotAllowedError, match="not listed"):
            await EndpointPolicy.parse("10.0.0.0/8").check(CONFIG, is_superadmin=False, resolve=cache)
        assert system.asked == 1


@pytest.mark.parametrize("case", ["ttl 0", "dns differs", "dns fails", "system fails"])
async def test_a_resolution_dns_cannot_vouch_for_is_never_kept(case):
    """No TTL, a different answer (a name from /etc/hosts, another resolver) or any failure: resolved at every use."""
    async with dns_server() as (zone, resolver):
        zone.records[("llm.test.", "A")] = (0 if case == "ttl 0" else 600, ["93.184.216.34"])
        system = System(zone)

        async def hosts_file(host: str, port: int) -> list[str]:
            system.asked += 1
            if case == "system fails":
                raise OSError("resolver down")
            return ["93.184.216.35"] if case == "dns differs" else await System(zone)(host, port)

        if case == "dns fails":
            resolver.port = 9  # nothing answers there: no TTL within the timeout
        cache = ResolutionCache(hosts_file, DnsLifetime(resolver, timeout=0.5 if case == "dns fails" else 5.0),
                                clock=Clock())
        for _ in range(2):
            if case == "system fails":
                with pytest.raises(OSError):
                    await cache("llm.test", 443)
            else:
                await cache("llm.test", 443)
            await cache.settled()
        assert system.asked == 2


async def test_the_cache_is_bounded():
    async with dns_server() as (zone, resolver):
        for i in range(5):
            zone.records[(f"h{i}.test.", "A")] = (600, [f"93.184.216.{i + 1}"])
        system = System(zone)
        cache = ResolutionCache(system, DnsLifetime(resolver), clock=Clock(), kept=3)
        for i in range(5):
            await cache(f"h{i}.test", 443)
            await cache.settled()
        await cache("h4.test", 443)
        assert system.asked == 5  # the newest kept
        await cache("h0.test", 443)
        assert system.asked == 6  # the oldest gone
