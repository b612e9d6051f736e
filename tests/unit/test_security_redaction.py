"""Keys are scrubbed from text, log records (message, arguments, traceback) and stored errors."""

from __future__ import annotations

import io
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gns3server.agent.gns3_copilot.redaction import MASK, SECRETS, SecretRegistry, install_log_scrubber, scrub
from gns3server.agent.gns3_copilot.service.checkpointer import ERROR_CHANNEL, scrub_writes

pytestmark = pytest.mark.security

KEY = "sk-proj-Zk3q9VfL2mXw8RtY6uHb"
PLAIN = "correct-horse-battery"


@pytest.mark.parametrize(
    "text",
    [
        f"Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: {KEY}.'}}}}",
        f"Authorization: Bearer {PLAIN}",
        f"HTTP Request: POST http://copilot:{PLAIN}@10.0.0.1/v1/chat/completions \"HTTP/1.1 200 OK\"",
        f"HTTP Request: POST https://{PLAIN}@llm.example/v1",
        f'{{"api_key": "{PLAIN}", "model": "m"}}',
        f"GET /v1/models?api_key={PLAIN}&x=1",
        f"x-api-key: {PLAIN}",
        "Google key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv",
        f"sk-ant-api03-{PLAIN}-abcdef",
        f'127.0.0.1:5000 - "GET /v3/copilot/projects/p/chat/sessions?token={PLAIN} HTTP/1.1" 200',
    ],
)
def test_key_shaped_strings_are_hidden(text):
    cleaned = scrub(text)
    assert MASK in cleaned
    assert PLAIN not in cleaned and KEY not in cleaned and "AIzaSy" not in cleaned


@pytest.mark.parametrize(
    "text",
    ["GET /v3/projects 200", "task sk-learn", "POST http://127.0.0.1:3080/v3/copilot/llm-configs", "a bearer of news"],
)
def test_ordinary_text_is_left_alone(text):
    assert scrub(text) == text


def test_a_registered_key_is_hidden_only_while_registered():
    registry = SecretRegistry()
    with registry.registered("MyOddKey1234", None, "ab"):  # too short and missing ones are ignored
        with registry.registered("MyOddKey1234"):
            assert registry.scrub("key=MyOddKey1234!") == f"key={MASK}!"
        assert registry.scrub("MyOddKey1234") == MASK  # still in use by the outer run
        assert registry.scrub("ab") == "ab"
    assert registry.scrub("MyOddKey1234") == "MyOddKey1234"


def test_the_longest_registered_key_is_hidden_whole():
    registry = SecretRegistry()
    with registry.registered("abcd1234", "abcd1234-and-more"):
        assert registry.scrub("[abcd1234-and-more]") == f"[{MASK}]"


KEY_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


@given(st.text(KEY_CHARS, min_size=8, max_size=60), st.text(max_size=40))
def test_any_registered_key_disappears_from_any_text(key, around):
    with SECRETS.registered(key):
        assert key not in scrub(around + key + around)


@pytest.fixture
def scrubbed_log():
    """A logger writing to a buffer, with the scrubbing record factory installed (restored after)."""
    previous = logging.getLogRecordFactory()
    install_log_scrubber()
    install_log_scrubber()  # idempotent
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("test.security.redaction")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, buffer
    finally:
        logger.removeHandler(handler)
        logging.setLogRecordFactory(previous)


def test_log_records_are_scrubbed_in_message_arguments_and_traceback(scrubbed_log):
    logger, buffer = scrubbed_log
    with SECRETS.registered(PLAIN):
        logger.debug("Request options: %s", {"headers": {"Authorization": f"Bearer {PLAIN}"}})
        logger.info(f"Formatted in place: {PLAIN}")
        logger.info("As an argument: %s (status %d)", PLAIN, 401)
        try:
            raise RuntimeError(f"Incorrect API key provided: {PLAIN}")
        except RuntimeError:
            logger.exception("Run failed")
        logger.warning("A key-shaped one, never registered: %s", KEY)
    text = buffer.getvalue()
    assert PLAIN not in text and KEY not in text
    assert "Traceback" in text and f"Incorrect API key provided: {MASK}" in text
    assert "(status 401)" in text


def test_arguments_without_secrets_stay_arguments(scrubbed_log):
    logger, _ = scrubbed_log
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        # uvicorn's access formatter unpacks record.args: they must survive untouched.
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/v3/version", "1.1", 200)
    finally:
        logger.removeHandler(handler)
    assert records[0].args == ("127.0.0.1:5000", "GET", "/v3/version", "1.1", 200)


def test_stored_errors_are_scrubbed_and_other_writes_kept():
    error = RuntimeError(f"Error code: 401 - Incorrect API key provided: {KEY}")
    message = {"content": f"the user typed {KEY}"}  # a conversation is the user's own: not rewritten
    writes = scrub_writes([(ERROR_CHANNEL, error), ("messages", message)])
    assert writes[0] == (ERROR_CHANNEL, f"RuntimeError('Error code: 401 - Incorrect API key provided: {MASK}')")
    assert writes[1] == ("messages", message)
