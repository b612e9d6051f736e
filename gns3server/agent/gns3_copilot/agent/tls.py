"""One verified TLS context for the copilot's HTTP clients to model servers.

httpx makes a context per client unless given one, loading the CA bundle each time (~30 ms of
CPU; on the event loop for the model servers' probe clients, which are made where a run needs
them). A context may serve any number of clients and connections at once.
"""

from __future__ import annotations

import functools
import ssl

__all__ = ["verified_context"]


@functools.cache
def verified_context() -> ssl.SSLContext:
    """httpx's default context (certificates verified against its CA bundle), made once."""
    import httpx  # the copilot's HTTP clients' library

    return httpx.create_ssl_context()
