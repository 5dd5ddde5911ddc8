"""The output files of a run, (re)written from the store alone: judgments.jsonl, consensus.csv/jsonl.

Category and type values are written as the rubric's display names (the seed's Chinese names),
with the stable ids beside them (``category_id``, ``type_id``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.run.store import CallRecord


def judgment_row(rubric: Rubric, rec: CallRecord, score: DimensionScore | None) -> dict[str, Any]:
    """One line of judgments.jsonl: a call's outcome with its re-derived score."""
    dim = rubric.dimension(rec.dimension)
    j = rec.judgment
    deductions = []
    penalties = []
    if j is not None:
        for d in j.deductions:
            cat, typ = dim.find_type(d.type)
            deductions.append({"category": cat.name, "type": typ.name, "points": d.points,
                               "evidence": d.evidence, "reason": d.reason,
                               "category_id": cat.id, "type_id": typ.id})
        for p in j.fixed_penalties:
            pen = dim.penalties_by_id[p.id]
            penalties.append({"name": pen.name, "points": pen.points, "evidence": p.evidence,
                              "reason": p.reason, "id": pen.id})
    return {
        "case_id": rec.case_id, "dimension": rec.dimension, "judge": rec.judge, "run": rec.run,
        "status": rec.status,
        "score": score.score if score else None,
        "stars": score.stars if score else None,
        "deductions": deductions,
        "fixed_penalties": penalties,
        "claimed_score": j.claimed_score if j else None,
        "claimed_stars": j.claimed_stars if j else None,
        "claim_mismatch": score.claim_mismatch if score else None,
        "comment": j.comment if j else None,
        "error": rec.error,
        "model": rec.model,
        "attempts": rec.attempts,
        "prompt_tokens": rec.prompt_tokens, "completion_tokens": rec.completion_tokens,
        "cost": rec.cost, "latency_s": round(rec.latency_s, 4) if rec.latency_s is not None else None,
        "request_hash": rec.request_hash,
    }


def write_judgments(path: Path, rubric: Rubric, records: Sequence[CallRecord],
                    derived: dict[str, DimensionScore]) -> None:
    with _atomic(path) as f:
        for rec in records:
            f.write(json.dumps(judgment_row(rubric, rec, derived.get(rec.request_hash)), ensure_ascii=False) + "\n")


def write_consensus(folder: Path, rubric: Rubric, cases: Sequence[CaseConsensus]) -> None:
    """consensus.csv (one row per case) and consensus.jsonl (everything, per judge and run)."""
    dims = [d.id for d in rubric.dimensions]
    with _atomic(folder / "consensus.csv") as f:
        w = csv.writer(f)
        w.writerow(["case_id", *dims, "total", "star_total", *(f"{d}_stars" for d in dims),
                    "n_judges", "status", "spread", "flagged", "flags"])
        for c in cases:
            w.writerow([c.case_id, *(fmt_num(c.scores[d]) for d in dims), fmt_num(c.total), fmt_num(c.star_total),
                        *(c.stars[d] if c.stars[d] is not None else "" for d in dims),
                        c.n_judges, c.status, fmt_num(c.spread), int(c.flagged), "; ".join(c.flags)])
    with _atomic(folder / "consensus.jsonl") as f:
        for c in cases:
            f.write(c.model_dump_json() + "\n")


def write_json(path: Path, data: Any) -> None:
    with _atomic(path) as f:
        json.dump(data, f, ensure_ascii=False, indent=2)
        f.write("\n")


def fmt_num(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.4f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


class _atomic:
    """Write to ``path.tmp`` and rename over ``path``: readers never see half a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_suffix(path.suffix + ".tmp")

    def __enter__(self):  # noqa: ANN204
        self.f = open(self.tmp, "w", encoding="utf-8", newline="")
        return self.f

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.f.close()
        if exc_type is None:
            self.tmp.replace(self.path)
        else:
            self.tmp.unlink(missing_ok=True)
