"""Which model servers are the lab's own: a machine nearby that serves one request at a time.

llama.cpp, llama-cpp-python, Ollama, LM Studio and vLLM on a lab's PC usually have
one slot: a second request waits for the first, or (llama-cpp-python's default,
``interrupt_requests``) ends the answer being streamed. So the background summary
of a conversation is never sent beside a question to such a server, and gives way
to one (``summaries/writer.py``). A cloud service has slots for everyone: there a
summary goes out at once, and waiting for every user's questions to end could
starve it.

An LLM config says which it is with ``local_server`` (true or false); without
it the host of ``base_url`` decides: an address that is not globally routable
(loopback, private, link-local, shared), ``localhost``, a name without a dot, or
a name under a suffix kept for local networks (``.local``, ``.lan``,
``.internal``, ``.home.arpa``, ``.localhost``, ``.localdomain``) is local
(``kind.py`` decides, with this module's :func:`is_local_host`). Addresses are
judged by the copilot's one classifier (:mod:`...addresses`), as the outbound
policy judges them.
"""

from __future__ import annotations

from ...addresses import is_public, parse_address

__all__ = ["LOCAL_SUFFIXES", "is_local_host"]

LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localhost", ".localdomain")


def is_local_host(host: str) -> bool:
    """Whether a URL's host names a machine of the local network (see the module's rules)."""
    name = host.strip("[]").lower().rstrip(".")
    if not name:
        return False
    try:
        address = parse_address(name)
    except ValueError:
        return name == "localhost" or "." not in name or name.endswith(LOCAL_SUFFIXES)
    return not is_public(address)
