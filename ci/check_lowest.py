"""Check that ci/lowest.txt pins every direct dependency at the lower bound pyproject.toml declares.

Direct dependencies are `[project].dependencies` and the `test` extra (what the "lowest" test run
installs). Every one must have a `>=` lower bound, and ci/lowest.txt must pin it `==` that version,
and pin nothing else. Run from the repo root: `python3 ci/check_lowest.py` (stdlib only).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
LOWER = re.compile(r">=\s*([^,;\s]+)")
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    errors: list[str] = []
    declared: dict[str, str] = {}
    for req in reqs:
        m = NAME.match(req)
        if not m:
            errors.append(f"cannot parse requirement {req!r}")
            continue
        low = LOWER.search(req)
        if not low:
            errors.append(f"{req!r} has no '>=' lower bound")
            continue
        declared[norm(m.group(1))] = low.group(1)
    pinned: dict[str, str] = {}
    for line in (ROOT / "ci" / "lowest.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = PIN.match(line)
        if not m:
            errors.append(f"ci/lowest.txt: not a '==' pin: {line!r}")
            continue
        pinned[norm(m.group(1))] = m.group(2)
    for name, version in sorted(declared.items()):
        if name not in pinned:
            errors.append(f"ci/lowest.txt does not pin {name} (declared >={version})")
        elif pinned[name] != version:
            errors.append(f"{name}: pyproject.toml says >={version}, ci/lowest.txt pins =={pinned[name]}")
    for name in sorted(set(pinned) - set(declared)):
        errors.append(f"ci/lowest.txt pins {name}, which is not a direct dependency")
    for e in errors:
        print(f"check_lowest: {e}", file=sys.stderr)
    if not errors:
        print(f"check_lowest: ci/lowest.txt pins all {len(declared)} direct dependencies at their lower bounds")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
