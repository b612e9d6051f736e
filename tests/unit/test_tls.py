"""The model servers' HTTP clients share one verified TLS context: the CA bundle is loaded once."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from gns3server.agent.gns3_copilot.agent import tls
from gns3server.agent.gns3_copilot.agent.server.client import ModelServerClient


@pytest.fixture
def bundle_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times a CA bundle is loaded into a TLS context (counted, then loaded as before)."""
    loads: list[int] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    tls.verified_context.cache_clear()
    yield loads
    tls.verified_context.cache_clear()


async def test_model_server_clients_share_one_context(bundle_loads: list[int]) -> None:
    clients = [ModelServerClient(f"https://server{n}.test.invalid/v1", "sk-x") for n in range(3)]
    try:
        assert len(bundle_loads) == 1
    finally:
        for client in clients:
            await client.aclose()


def test_the_shared_context_verifies_certificates_and_host_names(bundle_loads: list[int]) -> None:
    context = tls.verified_context()
    assert context is tls.verified_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert len(bundle_loads) == 1
