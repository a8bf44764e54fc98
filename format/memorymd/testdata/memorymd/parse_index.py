"""Reads an index MEMORY.md the way the Python memory writer's reader does (the bullet
regex of c-daly/memory lib/index.py, restated here) and prints one JSON object a line per
bullet it accepts: {"line": n, "path", "name", "type", "subject", "description"}.

Used by memorymd_test.go to check that memd's parser accepts the same bullets with the
same fields. Usage: python3 parse_index.py FILE
"""
import json
import re
import sys

SEP = "\u00b7"
BULLET_RE = re.compile(
    r"^- \[\[(?P<path>[^|\]]+)\|(?P<name>[^\]]+)\]\]"
    + r"\s+" + re.escape(SEP) + r"\s+type:(?P<type>\S+)\s+subject:(?P<subject>\S+)"
    + r"\s+" + re.escape(SEP) + r"\s+(?P<description>.*)$"
)

with open(sys.argv[1], "r", encoding="utf-8", newline="\n") as fh:
    for n, line in enumerate(fh, start=1):
        line = line.rstrip("\n")
        if not line.startswith("- [["):
            continue
        m = BULLET_RE.match(line)
        if not m:
            continue
        out = {k: m.group(k).strip() for k in ("path", "name", "type", "subject", "description")}
        out["line"] = n
        print(json.dumps(out, ensure_ascii=False))
