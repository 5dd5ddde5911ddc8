"""Grounding: the fuzzy threshold measured on real quotes, and the cost of grounding a run.

    python bench/grounding_bench.py threshold      # positives vs negatives at thresholds 70-95
    python bench/grounding_bench.py cost           # ground_all at 2,000 and 20,000 cases x 4 judges

**threshold**. Positives: stretches of the 16 example records and conversations (every rules-judge
quote, plus 40 seeded snippets of 4-24 characters per case) altered as LLM judges alter quotes: a
particle added (的/了/有), a character dropped, a character changed, or half of the quote elided
with ``……``; each looked up in its own case. Negatives: every unaltered snippet looked up in the
fifteen other cases (same vocabulary, but not there). For each alteration the share found at each
threshold (exact, normalised or fuzzy), and for the negatives the share wrongly found.

**cost**. Cases are the 16 examples cycled (distinct ids); each case gets 4 judges x 3 dimensions,
2 deductions each (evidence from the fake server's quote generator, 20% invented): 24 quotes per case.
Times ``consensus_eval.analysis.derived.ground_all`` (what ``read_run`` runs once per read).
Figures in bench/README.md, "Grounding".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consensus_eval.analysis.derived import ground_all  # noqa: E402
from consensus_eval.domain import grounding  # noqa: E402
from consensus_eval.domain.cases import Case, load_cases  # noqa: E402
from consensus_eval.domain.judgment import Deduction, Judgment  # noqa: E402
from consensus_eval.domain.rubric import load_rubric  # noqa: E402
from consensus_eval.execution.store import CallRecord  # noqa: E402
from consensus_eval.judges.rules import RulesJudge  # noqa: E402
from tests.fakellm import _snippet, quote  # noqa: E402

THRESHOLDS = (70, 75, 80, 85, 90, 95)


def _cases() -> list[Case]:
    return load_cases(ROOT / "examples" / "cases.jsonl").cases


def _rules_quotes(cases: list[Case]) -> dict[str, list[str]]:
    import asyncio

    from consensus_eval.domain.config import RulesJudgeConfig

    rubric = load_rubric("medical_record")
    judge = RulesJudge(RulesJudgeConfig(name="rules"), rubric)
    out: dict[str, list[str]] = {}
    for c in cases:
        for dim in rubric.dimensions:
            o = asyncio.run(judge.judge(c, dim, []))
            if o.judgment:
                out.setdefault(c.id, []).extend(
                    [d.evidence for d in o.judgment.deductions] + [p.evidence for p in o.judgment.fixed_penalties])
    return out


def _alter(rng: random.Random, q: str, how: str) -> str:
    i = rng.randint(1, max(1, len(q) - 1))
    if how == "particle":
        return q[:i] + rng.choice("的了有") + q[i:]
    if how == "drop":
        return q[:i] + q[i + 1:]
    if how == "change":
        return q[:i] + rng.choice("之其某该此") + q[i + 1:]
    if how == "elide":
        a = len(q) // 3
        return q[:a] + "……" + q[len(q) - a:]
    return q


def _best(q: str, case: Case, roles: dict[str, str]) -> tuple[str, float]:
    """(kind, score) with no threshold: fuzzy scores are raw."""
    g = grounding.ground(q, case.record, case.conversation_as_text(roles))
    return g.kind, g.score or 0.0


def threshold() -> None:
    cases = _cases()
    roles = load_rubric("medical_record").roles
    rng = random.Random(0)
    quotes = _rules_quotes(cases)
    snippets: dict[str, list[str]] = {}
    for c in cases:
        conv = c.conversation_as_text(roles)
        snippets[c.id] = [*quotes.get(c.id, []),
                          *(_snippet(rng, c.record if k % 4 else conv, 4, 24) for k in range(40))]
    saved = grounding.FUZZY_THRESHOLD
    grounding.FUZZY_THRESHOLD = 0.0
    try:
        rows: dict[str, list[tuple[str, float]]] = {}
        lengths: dict[str, list[int]] = {}
        pairs = [(c, q) for c in cases for q in snippets[c.id] if len(q) >= 4]
        for how in ("as is", "particle", "drop", "change", "elide"):
            rows[how] = [_best(_alter(rng, q, how), c, roles) for c, q in pairs]
            lengths[how] = [len(q) for _, q in pairs]
        rows["negatives"] = [_best(q, o, roles) for c, q in pairs for o in cases if o.id != c.id]
        lengths["negatives"] = [len(q) for _, q in pairs for o in cases if o.id != c.id]
    finally:
        grounding.FUZZY_THRESHOLD = saved
    print("share found (exact, normalised, or fuzzy at or above the threshold); negatives: share found")
    print("by fuzzy alone (a wrong match; exact hits of a common phrase in another case are not wrong)")
    print(f"{'':22}{'n':>6}" + "".join(f"{t:>8}" for t in THRESHOLDS))
    for how, got in rows.items():
        for band, lo, hi in (("4-7 chars", 4, 8), ("8+ chars", 8, 10**9)):
            sel = [(k, s) for (k, s), n in zip(got, lengths[how], strict=True) if lo <= n < hi]
            if how == "negatives":
                found = [sum(k == "fuzzy" and s >= t for k, s in sel) / len(sel) for t in THRESHOLDS]
            else:
                found = [sum(k in ("exact", "normalised") or (k == "fuzzy" and s >= t) for k, s in sel) / len(sel)
                         for t in THRESHOLDS]
            print(f"{how + ' ' + band:22}{len(sel):>6}" + "".join(f"{f:>8.3f}" for f in found))


def cost(sizes: list[int]) -> None:
    base = _cases()
    rubric = load_rubric("medical_record")
    dims = [d.id for d in rubric.dimensions]
    cand = {d.id: [(c.id, t.id, t.low) for c in d.categories for t in c.types] for d in rubric.dimensions}
    for n in sizes:
        rng = random.Random(n)
        cases, records = [], []
        for i in range(n):
            src = base[i % len(base)]
            case = src.model_copy(update={"id": f"{src.id}-{i}"})
            cases.append(case)
            conv = case.conversation_as_text(rubric.roles)
            for dim in dims:
                for judge in ("a", "b", "c", "d"):
                    ds = []
                    for _ in range(2):
                        cat, typ, pts = rng.choice(cand[dim])
                        ev, _inv = quote(rng, case.record, conv, 0.2)
                        ds.append(Deduction(category=cat, type=typ, points=pts, evidence=ev))
                    records.append(CallRecord(status="ok", judgment=Judgment(dimension=dim, deductions=ds),
                                              request_hash=f"{case.id}|{dim}|{judge}", case_id=case.id,
                                              dimension=dim, judge=judge, run=0))
        t0, c0 = time.perf_counter(), time.process_time()
        g = ground_all(rubric, cases, records)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        kinds: dict[str, int] = {}
        for x in g.values():
            kinds[x.kind] = kinds.get(x.kind, 0) + 1
        print(json.dumps({"cases": n, "quotes": len(g), "wall_s": round(dt, 2), "cpu_s": round(cpu, 2),
                          "cpu_us_per_quote": round(cpu / len(g) * 1e6, 1), "kinds": kinds}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["threshold", "cost"])
    p.add_argument("--sizes", default="2000,20000")
    a = p.parse_args()
    if a.what == "threshold":
        threshold()
    else:
        cost([int(x) for x in a.sizes.split(",")])


if __name__ == "__main__":
    main()
