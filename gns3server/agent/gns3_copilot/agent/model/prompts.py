"""System prompts, from files an administrator may edit; ``{{topology_info}}`` is replaced by the
context manager.

The packaged defaults are ``prompt_files/*.md``: ``system.md`` (the frame, with
``{mode_rules}`` and ``{{topology_info}}`` in it) and one file per purpose:
``teaching.md``, ``lab_automation.md`` (the modes) and ``fault_injection.md``
(``chat/inject``). The ``[Copilot] prompts_dir`` setting names a directory
whose files of the same names replace the packaged ones, file by file;
``POST /v3/copilot/reload/skills`` (GNS3 3.1's name) reads them again without a
restart. :func:`load_prompts` does file I/O: run it in a thread.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ...errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

PACKAGED_DIR = "prompt_files"
SYSTEM_FILE = "system.md"
FAULT_INJECTION = "fault_injection"
"""The purpose of a fault-injection run (GNS3 3.1's "Inject Fault"), and the kind of its session."""
PURPOSES = ("teaching", "lab_automation", FAULT_INJECTION)
"""The agent's modes, plus fault injection (which runs with lab automation's tools)."""
REQUIRED_PLACEHOLDERS = ("{mode_rules}", "{{topology_info}}")


class PromptFileError(CopilotError, ValueError):
    """An administrator's prompt file that cannot be used; the message names the file."""

    code = "prompt_file_invalid"
    kind = ErrorKind.INVALID


@dataclass(frozen=True)
class PromptSet:
    """The system frame and the rules of each purpose, and where each came from."""

    system: str
    rules: dict[str, str]
    sources: dict[str, str] = field(default_factory=dict)

    def system_for(self, purpose: str) -> str:
        """The system prompt for a mode (or ``fault_injection``), the topology placeholder still in it."""
        return self.system.replace("{mode_rules}", self.rules[purpose])


def _packaged(name: str) -> str:
    return resources.files(__package__).joinpath(PACKAGED_DIR, name).read_text("utf-8")


def load_prompts(directory: Path | None = None) -> PromptSet:
    """The packaged prompts, each replaced by the administrator's file of the same name in
    ``directory`` when there is one. Blocking; PromptFileError names a bad file."""
    texts: dict[str, str] = {}
    sources: dict[str, str] = {}
    for name in (SYSTEM_FILE, *(f"{p}.md" for p in PURPOSES)):
        custom = directory / name if directory is not None else None
        if custom is not None and custom.is_file():
            try:
                text = custom.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise PromptFileError(f"{custom}: cannot be read ({exc.__class__.__name__})") from exc
            if not text.strip():
                raise PromptFileError(f"{custom}: is empty")
            texts[name], sources[name] = text, str(custom)
        else:
            texts[name], sources[name] = _packaged(name), "packaged"
    system = texts[SYSTEM_FILE]
    missing = [p for p in REQUIRED_PLACEHOLDERS if p not in system]
    if missing:
        raise PromptFileError(f"{sources[SYSTEM_FILE]}: must contain {' and '.join(missing)}")
    rules = {p: texts[f"{p}.md"].strip() for p in PURPOSES}
    return PromptSet(system=system, rules=rules, sources=sources)


@functools.lru_cache(maxsize=1)
def default_prompts() -> PromptSet:
    """The packaged prompts (read once)."""
    return load_prompts(None)


def system_prompt_for(mode: str) -> str:
    """The packaged system prompt for a mode, with the topology placeholder still in it."""
    return default_prompts().system_for(mode)


# For small context windows (``small_window``): the same rules in a few words.
COMPACT_SYSTEM_PROMPT = """\
You are GNS3 Copilot, assistant for the user's GNS3 lab. Answer from the topology below \
and your tools' results; never invent output. A node's cli= is its CLI: use its commands. \
Be brief. Mode: {mode_rules}

### TOPOLOGY
{{topology_info}}
"""

COMPACT_MODE_RULES = {
    "teaching": "teaching (read only; guide the user).",
    "lab_automation": "lab automation (you may change the lab with tools).",
}


def compact_system_prompt_for(mode: str) -> str:
    """The short system prompt for small windows, with the topology placeholder still in it."""
    return COMPACT_SYSTEM_PROMPT.replace("{mode_rules}", COMPACT_MODE_RULES[mode])
