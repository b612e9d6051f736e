"""Which LLM endpoints the server may call on an ordinary user's behalf.

An LLM config's ``base_url`` makes the GNS3 server send HTTP requests (with a
conversation in them) to a URL the user chose. Left open, any user could make
the server reach what only the server can reach: its own loopback services, the
cloud metadata address, the lab's private networks. So, for users who are not
GNS3 superadmins, the ``[Copilot] user_llm_endpoints`` setting decides:

* ``public`` (the default): ``https`` URLs whose host resolves only to public
  (globally routable) addresses, as :mod:`..addresses` judges them (an IPv6
  address carrying an IPv4 one, NAT64, 6to4 and the like, by that IPv4 address);
* a host name (``ollama.lab.example``), a wildcard (``*.lab.example``), an
  address (``10.1.2.3``) or a network (``10.1.0.0/16``, ``fd00::/8``): that
  endpoint, over ``http`` or ``https``, whatever it resolves to (a listed name is
  the administrator's choice) or, for addresses and networks, when every address
  the host resolves to is in them;
* ``*``: anything (the behaviour before this setting existed).

Entries are comma separated: ``public, 10.1.0.0/16, ollama.lab.example``; a
list without ``public`` allows only what it lists. Superadmins may use any
endpoint, and the server-wide default config is the administrator's own.

The host is judged when a config is created or changed *and* again when a run
uses it, each time resolved afresh with the event loop's resolver (in a worker
thread), so a name that later resolves to an internal address (DNS rebinding)
is refused at use. A refusal is :class:`EndpointNotAllowedError` (HTTP 403).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..addresses import IPAddress, describe, is_public, parse_address
from ..errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

PUBLIC = "public"
ANY = "*"
DEFAULT_POLICY = PUBLIC
RESOLVE_TIMEOUT_SECONDS = 10.0
SETTING = "user_llm_endpoints"

# Where a provider's client goes when the config names no base_url.
_IMPLICIT_BASE_URLS = {"ollama": "http://localhost:11434"}

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]


class EndpointNotAllowedError(CopilotError):
    """An LLM endpoint this user may not make the server call."""

    kind = ErrorKind.FORBIDDEN
    code = "llm_endpoint_not_allowed"


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, by the loop's resolver (off the event loop)."""
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(
        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_SECONDS
    )
    return sorted({str(info[4][0]) for info in infos})


def _address(text: str) -> IPAddress:
    """The address itself; IPv4-mapped ones as their IPv4 address (the same host, for a listed network)."""
    address = parse_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return address


@dataclass(frozen=True)
class EndpointPolicy:
    """The parsed ``user_llm_endpoints`` setting."""

    public: bool = True
    any: bool = False
    hosts: frozenset[str] = frozenset()
    """Exact host names, lower case without a trailing dot; ``*.suffix`` entries as ``.suffix``."""
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> EndpointPolicy:
        """The policy of a setting's value (blank: the default); ValueError naming a bad entry."""
        entries = [e.strip() for e in (text if text and text.strip() else DEFAULT_POLICY).split(",") if e.strip()]
        public = any_ = False
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            lowered = entry.lower().rstrip(".")
            if lowered == PUBLIC:
                public = True
            elif lowered == ANY:
                any_ = True
            elif lowered.startswith("*."):
                hosts.add(lowered[1:])
            elif _looks_like_address(lowered):
                try:
                    networks.append(ipaddress.ip_network(lowered, strict=False))
                except ValueError:
                    raise ValueError(f"{entry!r} is not an address or a network") from None
            elif _is_host_name(lowered):
                hosts.add(lowered)
            else:
                raise ValueError(f"{entry!r} is not a host name, an address, a network, 'public' or '*'")
        return cls(public=public, any=any_, hosts=frozenset(hosts), networks=tuple(networks))

    def describe(self) -> str:
        """What ordinary users may use, in words (for refusal messages)."""
        if self.any:
            return "any endpoint"
        parts = ["public https endpoints"] if self.public else []
        parts += sorted(f"*{h}" if h.startswith(".") else h for h in self.hosts)
        parts += [str(n) for n in self.networks]
        return ", ".join(parts) if parts else "no endpoint other than the server's default"

    def _host_listed(self, host: str) -> bool:
        return host in self.hosts or any(h.startswith(".") and host.endswith(h) for h in self.hosts)

    def _in_networks(self, addresses: Iterable[IPAddress]) -> bool:
        return all(any(a in n for n in self.networks) for a in addresses)

    async def check(self, config: Mapping[str, Any], *, is_superadmin: bool, resolve: Resolver = resolve_host) -> None:
        """Return if a user may use ``config``'s endpoint, else raise EndpointNotAllowedError."""
        if is_superadmin or self.any:
            return
        url = config.get("base_url") or _IMPLICIT_BASE_URLS.get(str(config.get("provider", "openai")))
        if not url:  # the provider's own public API
            if self.public:
                return
            raise EndpointNotAllowedError(
                f"base_url: the provider's public API is not allowed for users here. Allowed for users: "
                f"{self.describe()}; an administrator may allow more with [Copilot] {SETTING}."
            )
        parts = urlsplit(str(url))
        host = (parts.hostname or "").lower().rstrip(".")
        scheme = parts.scheme.lower()
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise EndpointNotAllowedError("base_url: the port is not a valid number") from None
        if not host:
            raise EndpointNotAllowedError("base_url: the URL names no host")
        if self._host_listed(host):
            return
        addresses = await self._addresses(host, port, resolve)
        if self.networks and self._in_networks(addresses):
            return
        hidden = next((a for a in addresses if not is_public(a)), None)
        if hidden is None and self.public and scheme == "https":
            return
        if hidden is not None:
            verb = "is" if _is_literal(host) else "resolves to"
            why = f"{host} {verb} {describe(hidden)}"
        elif not self.public:
            why = f"{host} is not listed"
        else:
            why = "plain http to a public host would send the conversation and key unencrypted"
        log.warning("Refused an LLM endpoint for an ordinary user: %s", why)
        raise EndpointNotAllowedError(
            f"base_url: the server may not send requests there for you ({why}). Allowed for users: "
            f"{self.describe()}; an administrator may allow more with [Copilot] {SETTING}."
        )

    @staticmethod
    async def _addresses(host: str, port: int, resolve: Resolver) -> list[IPAddress]:
        if _looks_like_address(host.strip("[]")):
            try:
                return [_address(host.strip("[]"))]
            except ValueError:
                pass  # not an address after all (a name of digits): resolve it
        try:
            found = await resolve(host, port)
        except (TimeoutError, OSError, UnicodeError) as exc:
            raise EndpointNotAllowedError(
                f"base_url: {host} cannot be checked: it does not resolve from the server ({type(exc).__name__})"
            ) from exc
        if not found:
            raise EndpointNotAllowedError(f"base_url: {host} cannot be checked: it resolves to no address")
        return [_address(a) for a in found]


def _is_literal(host: str) -> bool:
    try:
        parse_address(host)
    except ValueError:
        return False
    return True


def _looks_like_address(text: str) -> bool:
    return ":" in text or all(c.isdigit() or c in "./" for c in text)


def _is_host_name(text: str) -> bool:
    labels = text.split(".")
    return bool(text) and len(text) <= 253 and all(
        label and len(label) <= 63 and all(c.isalnum() or c == "-" for c in label) for label in labels
    )
