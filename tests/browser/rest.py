"""A small synchronous REST client for browser tests (setup and server-side checks).

Selenium is synchronous, so are these tests; urllib keeps them free of an event
loop. Every call has a timeout; JSON in, ``(status, json-or-text)`` out.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

TIMEOUT = 30.0


class Rest:
    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        text = raw.decode("utf-8", errors="replace")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON of a call that must succeed (2xx)."""
        status, result = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path} -> {status}: {result}"
        return result

    def login(self, username: str, password: str) -> Rest:
        """A client for ``username`` (a fresh token)."""
        result = self.ok("POST", "/v3/access/users/authenticate", {"username": username, "password": password})
        return Rest(self.base_url, result["access_token"])

    def add_user(self, username: str, password: str, role: str = "User", path: str = "/projects") -> str:
        """Create a GNS3 user (as this administrator) with GNS3's ``role`` on ``path``; its id."""
        role_id = next(r["role_id"] for r in self.ok("GET", "/v3/access/roles") if r["name"] == role)
        user = self.ok("POST", "/v3/access/users", {"username": username, "password": password})
        self.ok("POST", "/v3/access/acl", {"ace_type": "user", "path": path, "propagate": True,
                                          "allowed": True, "user_id": user["user_id"], "role_id": role_id})
        return str(user["user_id"])
