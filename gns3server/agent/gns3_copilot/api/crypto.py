"""Encryption at rest for the API keys of LLM configs.

Keys are encrypted with Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``)
under one server key kept in a file of the GNS3 secrets directory, next to
GNS3's own JWT secret, readable by the server's user only (0600). The database
alone therefore reveals no API key; the key file alone decrypts nothing.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from .errors import StoredKeyUnreadableError

log = logging.getLogger(__name__)

KEY_FILE_NAME = "gns3_copilot_secret.key"


def load_or_create_key(directory: Path) -> bytes:
    """The Fernet key in ``directory``, created (0600, atomically) on first use. Blocking."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / KEY_FILE_NAME
    if not path.exists():
        # Write a private temporary file, then link it into place: another process
        # starting at the same moment either wins or reads a complete key, never half.
        temporary = directory / f".{KEY_FILE_NAME}.{secrets.token_hex(8)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(Fernet.generate_key())
            try:
                os.link(temporary, path)
                log.info("Created the copilot secret key file %s", path)
            except FileExistsError:
                pass
        finally:
            temporary.unlink(missing_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning("Copilot secret key file %s was readable by others (mode %o); setting it to 0600", path, mode)
        path.chmod(0o600)
    return path.read_bytes().strip()


class SecretBox:
    """Encrypts and decrypts short secrets (API keys) with the server key."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    def __repr__(self) -> str:
        return "<SecretBox>"

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """The secret, or StoredKeyUnreadableError when the server key changed since it was stored."""
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, ValueError):
            raise StoredKeyUnreadableError(
                "The stored API key of this LLM config cannot be decrypted (the copilot secret key "
                "of the server changed); set the API key again."
            ) from None
