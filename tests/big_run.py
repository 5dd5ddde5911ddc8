"""A large run written straight into a store, for the report's size and browser tests and its bench.

``build_big_run(folder, n_cases, judges)`` fills ``folder/results.sqlite`` as a finished run would
leave it: the bundled examples' records and conversations made distinct per case (every digit of a
record redrawn, a short note appended, a seeded shuffle of the conversation's turns), and for each
(case, judge, dimension) 0-4 deductions of the rubric's types whose evidence quotes the record
(most), the conversation, or nothing found anywhere (about one in eight, like an invented quote).
Seeded: the same arguments give the same store. No judge runs, so 2,000 cases x 4 judges take a
few seconds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds import Deductions, of_kind
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.execution.store import CallRecord, PlannedCall
from tests.helpers import write_store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cases.jsonl"


def big_cases(n: int, seed: int = 0) -> list[Case]:
    """``n`` distinct cases built from the bundled examples (module docstring)."""
    rng = random.Random(seed)
    base = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for i in range(n):
        src = base[i % len(base)]
        record = "".join(str(rng.randrange(10)) if ch.isdigit() else ch for ch in src["record"])
        record += f"\n备注：第{i}号随访，复诊时间{rng.randrange(1, 13)}月{rng.randrange(1, 29)}日。"
        conv = src["conversation"]
        if isinstance(conv, list):
            conv = list(conv)
            k = rng.randrange(len(conv))
            conv[k] = {**conv[k], "text": conv[k]["text"] + f"（{rng.randrange(100, 999)}）"}
        out.append(Case(id=f"big-{i:05d}", conversation=conv, record=record, important=(i % 7 == 0)))
    return out


def _quote(rng: random.Random, text: str) -> str:
    if len(text) < 12:
        return text
    start = rng.randrange(0, len(text) - 10)
    return text[start:start + rng.randrange(4, 10)].strip() or text[:6]


def build_big_run(folder: Path, n_cases: int = 2000, n_judges: int = 4, seed: int = 0) -> Path:
    """Fill ``folder/results.sqlite`` with ``n_cases`` x ``n_judges`` judgments (module docstring)."""
    rng = random.Random(seed)
    rubric = load_rubric("medical_record")
    judges = [f"judge-{chr(ord('a') + k)}" for k in range(n_judges)]
    config = EvalConfig.model_validate({"judges": [{"name": j, "model": f"openai/{j}"} for j in judges]})
    cases = big_cases(n_cases, seed)
    planned = [PlannedCall(f"{c.id}|{j}|{d.id}|0", c.id, d.id, j, 0)
               for c in cases for j in judges for d in rubric.dimensions]
    by_id = {c.id: c for c in cases}

    def records() -> Iterator[CallRecord]:  # drawn one by one as they are stored
        for p in planned:
            case = by_id[p.case_id]
            dim = rubric.dimension(p.dimension)
            conv = case.conversation if isinstance(case.conversation, str) else \
                "".join(t.text for t in case.conversation)
            deds = []
            for _ in range(rng.choice((0, 0, 1, 1, 2, 3, 4))):
                cat = rng.choice(of_kind(dim, Deductions).categories)
                typ = rng.choice(cat.types)
                r = rng.random()
                evidence = (_quote(rng, case.record) if r < 0.7 else _quote(rng, conv) if r < 0.875
                            else f"编造的引文{rng.randrange(10_000)}")
                deds.append(Deduction(category=cat.id, type=typ.id, points=typ.low, evidence=evidence,
                                      reason=f"{typ.name}：与对话不符"))
            pens = [PenaltyHit(id=pen.id, evidence=_quote(rng, case.record))
                    for pen in of_kind(dim, Deductions).fixed_penalties if rng.random() < 0.05]
            judgment = Judgment(dimension=p.dimension, deductions=deds, fixed_penalties=pens)
            yield CallRecord(status="ok", judgment=judgment, raw=judgment.model_dump_json(),
                             request_hash=p.request_hash, case_id=p.case_id, dimension=p.dimension,
                             judge=p.judge, run=p.run, model=f"openai/{p.judge}", prompt_tokens=1500,
                             completion_tokens=300, cost=0.002, latency_s=2.0)

    return write_store(folder, rubric, config, cases, records(), planned)
