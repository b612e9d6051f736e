"""bench/cache.py reports, per request, the tokens sent and those of the prefix shared with the previous request."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from cache import PER_REQUEST_COLUMNS, VARIANTS, replay, short_turns, write_per_request


def test_the_per_request_figures_add_up_to_the_aggregates():
    result = replay(short_turns(120), 8, VARIANTS["window+mask+cap+summary"], "call")
    rows = result["per_request"]
    assert [r["request"] for r in rows] == list(range(1, result["requests"] + 1))
    assert rows[0]["shared"] == 0 and all(0 <= r["shared"] <= r["sent"] for r in rows)
    assert sum(r["sent"] - r["shared"] for r in rows) == result["uncached"]
    full = [r["full"] for r in rows]
    assert full == sorted(full) and sum(full) == result["requests_full"] > 0  # full from the first drop on
    assert [r["at"] for r in rows] == sorted({r["at"] for r in rows})
    assert all(r["shared"] > r["sent"] // 2 for r in rows[1:] if not r["full"])  # a growing request repeats the last


def test_the_per_request_table_has_a_row_per_request():
    result = replay(short_turns(40), 8, VARIANTS["plain"], "question")
    rows = [{"profile": "short", "limit": 8, "per": "question", "variant": "plain", **result}]
    out = io.StringIO()
    write_per_request(rows, out, as_csv=True)
    table = list(csv.reader(io.StringIO(out.getvalue())))
    assert tuple(table[0]) == PER_REQUEST_COLUMNS and len(table) == 1 + result["requests"]
    first = dict(zip(PER_REQUEST_COLUMNS, table[1]))
    assert first["conversation"] == "short" and first["limit"] == "8K" and first["variant"] == "plain"
    assert first["request"] == "1" and first["shared prefix tokens"] == "0" and first["budget full"] == "no"
    markdown = io.StringIO()
    write_per_request(rows, markdown)
    assert markdown.getvalue().count("\n") == 2 + result["requests"]
