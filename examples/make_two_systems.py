"""Build examples/cases_two_systems.jsonl: the 16 bundled cases as written by two systems.

``scribe-a`` is the bundled records as they are; ``scribe-b`` is a seeded perturbation of each record (a
weaker scribe): one or two of these edits, chosen at random with the seed,

- a number of the present illness off by one (a value error),
- the family history left out (an omission),
- a term made colloquial (多饮 -> 喝水多, 多尿 -> 尿多, 口干 -> 嘴干),

so the same conversation is written up by both systems (a paired design: ``source`` is the bundled id).
Run from the repository root: ``python examples/make_two_systems.py`` (seed 7; the file is committed).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 7
COLLOQUIAL = {"多饮": "喝水多", "多尿": "尿多", "口干": "嘴干"}


def off_by_one(record: str, rng: random.Random) -> str | None:
    head, sep, rest = record.partition("现病史：")
    if not sep:
        return None
    body, nl, tail = rest.partition("\n")
    numbers = list(re.finditer(r"\d+\.\d+", body))
    if not numbers:
        return None
    m = rng.choice(numbers)
    value = f"{float(m.group()) + 1:.1f}"
    return head + sep + body[:m.start()] + value + body[m.end():] + nl + tail


def drop_family_history(record: str, rng: random.Random) -> str | None:
    del rng
    lines = record.split("\n")
    kept = [x for x in lines if not x.startswith("家族史：")]
    return "\n".join(kept) if len(kept) < len(lines) else None


def colloquial(record: str, rng: random.Random) -> str | None:
    found = [w for w in COLLOQUIAL if w in record]
    if not found:
        return None
    w = rng.choice(found)
    return record.replace(w, COLLOQUIAL[w], 1)


EDITS = (off_by_one, drop_family_history, colloquial)


def perturb(record: str, rng: random.Random) -> tuple[str, list[str]]:
    """One or two edits; when the chosen ones find nothing to change, the others are tried in turn, so
    every record of scribe-b differs from scribe-a's."""
    edits = rng.sample(EDITS, k=len(EDITS))
    want = rng.choice((1, 2))
    done = []
    for edit in edits:
        changed = edit(record, rng)
        if changed is not None and changed != record:
            record = changed
            done.append(edit.__name__)
        if len(done) == want:
            break
    return record, done


def main() -> None:
    rng = random.Random(SEED)
    out = []
    for line in (HERE / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        a = {**case, "system": "scribe-a", "source": case["id"]}
        record, edits = perturb(case["record"], rng)
        b = {**case, "id": case["id"] + "-b", "record": record, "system": "scribe-b", "source": case["id"],
             "meta": {**case.get("meta", {}), "perturbation": edits}}
        out += [a, b]
    (HERE / "cases_two_systems.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in out), encoding="utf-8")


if __name__ == "__main__":
    main()
