"""Host resolutions for the outbound policy, remembered no longer than DNS says they hold.

The policy (``endpoints.py``) judges a user's ``base_url`` at every run, by the
addresses its host resolves to: with no memory, every run waited for a resolution
of the same name. :class:`ResolutionCache` keeps one, but only when DNS itself says
how long it holds: the system's resolver (``getaddrinfo``, what the policy always
judged, ``/etc/hosts`` included) is asked as before and, beside it, DNS for the
host's A and AAAA records; the system's answer is kept for the shortest TTL of
those records (CNAMEs and negative answers included) when DNS gave exactly the same
addresses, and not at all otherwise (a name from ``/etc/hosts``, a resolver that
answers differently, a TTL of 0, any failure). DNS is asked in the background: a run
never waits for it (a slow or unreachable DNS only means nothing is kept), and its
answer counts from before the question. So a name whose records change is
resolved afresh once the old ones have expired, and the policy is judged again at
every use, on whatever is current.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..addresses import parse_address

if TYPE_CHECKING:
    import dns.asyncresolver

log = logging.getLogger(__name__)

__all__ = ["DNS_TIMEOUT_SECONDS", "DnsLifetime", "ResolutionCache"]

DNS_TIMEOUT_SECONDS = 2.0
"""The longest DNS is asked for a TTL (in the background: no run waits for it); none by then, nothing kept."""
KEPT_HOSTS = 256

Resolve = Callable[[str, int], Awaitable[list[str]]]
Lifetime = Callable[[str], Awaitable[tuple[frozenset[str], float] | None]]


def _normalised(addresses: Iterable[str]) -> frozenset[str]:
    found = set()
    for text in addresses:
        address = parse_address(text)  # for comparing answers only: the policy judges them (addresses.py)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        found.add(str(address))
    return frozenset(found)


def _same(found: list[str], addresses: frozenset[str]) -> bool:
    try:
        return _normalised(found) == addresses
    except ValueError:  # not an address: the policy says so when it judges it
        return False


class DnsLifetime:
    """A host's A and AAAA addresses in DNS and how long that answer holds, or None.

    ``resolver``: a dnspython resolver (default: the system's ``resolv.conf``, its search
    domains applied as ``getaddrinfo`` does).
    """

    def __init__(self, resolver: dns.asyncresolver.Resolver | None = None, timeout: float = DNS_TIMEOUT_SECONDS) -> None:
        self._resolver = resolver
        self._timeout = timeout

    def _configured(self) -> dns.asyncresolver.Resolver:
        if self._resolver is None:
            import dns.asyncresolver  # reads resolv.conf: at the first use, not at import

            self._resolver = dns.asyncresolver.Resolver()
        return self._resolver

    async def __call__(self, host: str) -> tuple[frozenset[str], float] | None:
        import dns.exception

        resolver = self._configured()
        try:
            answers = await asyncio.gather(*(
                resolver.resolve(host, rdtype, lifetime=self._timeout, search=True, raise_on_no_answer=False)
                for rdtype in ("A", "AAAA")
            ))
        except (dns.exception.DNSException, OSError) as exc:
            log.debug("No TTL for %s from DNS (%s): its resolution is not kept", host, type(exc).__name__)
            return None
        addresses = [str(record) for answer in answers if answer.rrset is not None for record in answer.rrset]
        held = min(float(answer.chaining_result.minimum_ttl) for answer in answers)
        return _normalised(addresses), held


@dataclass
class _Kept:
    addresses: list[str]
    expires: float


class ResolutionCache:
    """``resolve`` (the system's resolver), its answers kept while DNS says they hold (see the module).

    Callable as the policy's resolver. ``clock``: monotonic seconds. One per server,
    bounded to :data:`KEPT_HOSTS` names.
    """

    def __init__(
        self, resolve: Resolve, lifetime: Lifetime | None = None, *, clock: Callable[[], float] = time.monotonic,
        kept: int = KEPT_HOSTS,
    ) -> None:
        self._resolve = resolve
        self._lifetime = lifetime if lifetime is not None else DnsLifetime()
        self._clock = clock
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._max = kept
        self._pending: set[asyncio.Future[Any]] = set()

    async def __call__(self, host: str, port: int) -> list[str]:
        key = host.lower().rstrip(".")
        asked = self._clock()  # the TTL counts from before the question: never kept past it
        kept = self._kept.get(key)
        if kept is not None:
            if asked < kept.expires:
                self._kept.move_to_end(key)
                return list(kept.addresses)
            del self._kept[key]
        lifetime = asyncio.ensure_future(self._held(key))
        try:
            found = await self._resolve(host, port)
        except BaseException:
            lifetime.cancel()
            raise
        # The run does not wait for DNS's TTL: a slow or unreachable DNS only means nothing is kept.
        self._pending.add(lifetime)
        lifetime.add_done_callback(functools.partial(self._learnt, key, list(found), asked))
        return found

    def _learnt(self, key: str, found: list[str], asked: float, lifetime: asyncio.Future[Any]) -> None:
        self._pending.discard(lifetime)
        held = None if lifetime.cancelled() else lifetime.result()
        if held is not None and held[1] > 0 and found and _same(found, held[0]):
            self._kept[key] = _Kept(found, asked + held[1])
            self._kept.move_to_end(key)
            while len(self._kept) > self._max:
                self._kept.popitem(last=False)

    async def settled(self) -> None:
        """Wait until the TTLs being asked for are known (and their resolutions kept or not)."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop asking DNS for TTLs (the server is stopping)."""
        for pending in list(self._pending):
            pending.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def _held(self, host: str) -> tuple[frozenset[str], float] | None:
        try:
            return await self._lifetime(host)
        except Exception:  # a TTL that cannot be learnt: the resolution is just not kept
            log.debug("Looking up the TTL of %s failed", host, exc_info=True)
            return None
