"""Tokens the model reads for a show command: raw text, TextFSM rows, the CLI's JSON (our tokenizer).

Published captures of real show outputs (``bench/data/structured_output``, each with its
origin) are counted with the context manager's ``count_tokens`` (cl100k_base): the raw
text (the naive baseline: what the show tool hands over today), the same text parsed by
ntc-templates and written as compact rows, and the command's JSON (EOS/NX-OS ``| json``,
as their APIs return it) without indentation. Costs are per item (interface, route,
neighbour), since a JSON capture may list another device. The last column is what
``console.structured.choose`` picks; ``console/structured.toml`` records it (``--toml``
prints the records).

Run: ``.venv/bin/python bench/structured_output.py`` (``--toml`` for the records).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gns3server.agent.gns3_copilot.agent.context_manager import count_tokens
from gns3server.agent.gns3_copilot.console.families import SPECS
from gns3server.agent.gns3_copilot.console.structured import choose, text_rows, tokens_per_item

DATA = Path(__file__).parent / "data" / "structured_output"
PLATFORMS = {name: spec.textfsm_platform for name, spec in SPECS.items()} | {
    "eos": "arista_eos", "junos": "juniper_junos", "iosxr": "cisco_xr", "nxos": "cisco_nxos", "vrp": "huawei_vrp",
    "linux": "linux",
}


def json_items(text: str, path: str | None) -> int:
    value: Any = json.loads(text)
    for key in (path.split(".") if path else ()):
        value = value[key]
    return len(value) if path else 1


def measure(capture: dict[str, Any]) -> dict[str, Any]:
    family, command = capture["family"], capture["command"]
    raw = (DATA / capture["text"]).read_text("utf-8")
    started = time.perf_counter()
    rows = text_rows(PLATFORMS[family], command, raw)
    parse_ms = (time.perf_counter() - started) * 1000
    json_text = (DATA / capture["json"]).read_text("utf-8") if "json" in capture else None
    items = json_items(json_text, capture.get("json_items")) if json_text is not None else 1
    tokens = tokens_per_item(count_tokens, raw, rows, json_text, items)
    return {"family": family, "command": command, "raw_total": count_tokens(raw), "rows": len(rows),
            "tokens": tokens, "choice": choose(tokens), "parse_ms": parse_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toml", action="store_true", help="print the records for console/structured.toml")
    args = parser.parse_args()
    captures = tomllib.loads((DATA / "captures.toml").read_text("utf-8"))["capture"]
    results = [measure(c) for c in captures]
    if args.toml:
        for r in results:
            tokens = ", ".join(f"{k} = {v}" for k, v in r["tokens"].items())
            print(f'[[{r["family"]}.command]]\ncommand = "{r["command"]}"\nuse = "{r["choice"]}"\ntokens = {{ {tokens} }}\n')
        return
    print("tokens per item (cl100k_base); raw is the naive baseline")
    print(f"{'family':9}{'command':36}{'items':>6}{'raw total':>10}{'raw':>8}{'textfsm':>9}{'json':>8}"
          f"{'saved':>8}{'parse ms':>10}  choice")
    for r in results:
        t = r["tokens"]
        best = t.get(r["choice"], t["raw"])
        saved = 1 - best / t["raw"]
        print(f"{r['family']:9}{r['command']:36}{r['rows']:>6}{r['raw_total']:>10}{t['raw']:>8}"
              f"{t.get('textfsm', '-'):>9}{t.get('json', '-'):>8}{saved:>8.0%}{r['parse_ms']:>10.1f}  {r['choice']}")
    raw = sum(r["tokens"]["raw"] * max(r["rows"], 1) for r in results)
    chosen = sum(r["tokens"].get(r["choice"], r["tokens"]["raw"]) * max(r["rows"], 1) for r in results)
    print(f"all captures: raw {raw:.0f} tokens, chosen forms {chosen:.0f} ({1 - chosen / raw:.0%} fewer)")


if __name__ == "__main__":
    main()
