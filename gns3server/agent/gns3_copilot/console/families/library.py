"""Reading a family's knowledge from the installed scrapli / scrapli-community, as data.

Nothing is imported before :func:`load_family` is called (importing scrapli's drivers
takes about 150 ms: callers load the families once, in a worker thread, at start-up).
What is read: the platform's privilege levels (prompt pattern, escalate and deescalate
commands, the level before), its ``failed_when_contains`` strings, its Enter key and
its TextFSM platform. scrapli only connects when a driver object is opened; we never
make one.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from ...errors import CopilotError, ErrorKind
from ..modes import Level
from .model import Family, FamilySpec, Structured

log = logging.getLogger(__name__)

CORE = "scrapli.driver.core"
COMMUNITY = "scrapli_community"


class FamilyLibraryError(CopilotError, RuntimeError):
    """The installed library does not hold what a family needs (a version we were not written for)."""

    code = "console_family_library"
    kind = ErrorKind.INTERNAL


def prompt_regex(pattern: str) -> re.Pattern[str]:
    """A scrapli prompt pattern (``^...$``, matched with re.M | re.I on text without CRs) as a
    regex that finds the prompt at the very end of console output, CRs or not.

    A pattern spanning two lines (SR Linux's, Junos's ``{master:0}`` banner) takes the CR
    our consoles keep before its line break.
    """
    return re.compile("(?:" + pattern.replace(r"\n", r"\r*\n") + r")[ \t]*\Z", re.MULTILINE | re.IGNORECASE)


def _levels(privs: Mapping[str, Any]) -> tuple[Level, ...]:
    return tuple(
        Level(
            name=name,
            pattern=priv.pattern,
            prompt=prompt_regex(priv.pattern),
            previous=priv.previous_priv,
            escalate=priv.escalate,
            deescalate=priv.deescalate,
            escalate_auth=bool(priv.escalate_auth),
            escalate_prompt=priv.escalate_prompt,
            not_contains=tuple(priv.not_contains or ()),
        )
        for name, priv in privs.items()
    )


def _core(spec: FamilySpec) -> tuple[tuple[Level, ...], list[str], str, str]:
    """A core platform: ``base_driver.PRIVS`` / ``FAILED_WHEN_CONTAINS`` and the async driver's defaults."""
    base = importlib.import_module(f"{CORE}.{spec.library.platform}.base_driver")
    driver = getattr(importlib.import_module(f"{CORE}.{spec.library.platform}.async_driver"), spec.library.driver_class)
    defaults = inspect.signature(driver.__init__).parameters
    textfsm = defaults["textfsm_platform"].default
    ret = defaults["comms_return_char"].default if "comms_return_char" in defaults else "\n"
    return _levels(base.PRIVS), list(base.FAILED_WHEN_CONTAINS), str(textfsm or ""), str(ret)


def _community(spec: FamilySpec) -> tuple[tuple[Level, ...], list[str], str, str]:
    """A community platform: its ``SCRAPLI_PLATFORM["defaults"]``.

    A generic-driver platform (RouterOS, FortiOS) has one prompt pattern and no levels:
    it becomes a single level named ``exec``.
    """
    module = importlib.import_module(f"{COMMUNITY}.{spec.library.platform.replace('_', '.')}")
    defaults: Mapping[str, Any] = module.SCRAPLI_PLATFORM["defaults"]
    if "privilege_levels" in defaults:
        levels = _levels(defaults["privilege_levels"])
    else:
        pattern = defaults["comms_prompt_pattern"]
        levels = (Level("exec", pattern, prompt_regex(pattern), "", "", ""),)
    ret = defaults.get("comms_return_char", "\n")
    return levels, list(defaults.get("failed_when_contains", ())), str(defaults.get("textfsm_platform", "")), ret


def load_family(spec: FamilySpec) -> Family:
    """Build the family from ``spec`` and the installed library (FamilyLibraryError if it lacks it)."""
    reader = _community if spec.library.community else _core
    try:
        levels, failed, textfsm, return_char = reader(spec)
    except ImportError as exc:
        raise FamilyLibraryError(f"{spec.name}: scrapli platform {spec.library.platform} is not installed ({exc})") from exc
    except (AttributeError, KeyError, TypeError) as exc:
        raise FamilyLibraryError(f"{spec.name}: scrapli platform {spec.library.platform} lacks {exc}") from exc
    extra = tuple(Level(name, p, prompt_regex(p), spec.read_level, "", spec.extra_exits.get(name, ""))
                  for name, p in spec.extra_prompts.items())
    names = {level.name for level in levels}
    for needed in (spec.read_level, spec.config_level):
        if needed is not None and needed not in names:
            raise FamilyLibraryError(f"{spec.name}: scrapli platform {spec.library.platform} has no level {needed!r}")
    package = "scrapli-community" if spec.library.community else "scrapli"
    return Family(
        spec=spec,
        levels=levels + extra,
        errors=tuple(dict.fromkeys((*failed, *spec.errors))),
        structured=Structured(spec.json_suffix, textfsm or spec.textfsm_platform),
        return_char=return_char,
        library_version=f"{package} {metadata.version(package)}",
    )
