"""Judge quality: facts about each judge, not about any case.

For each judge of the panel, over every successful run of the run:

- ``deductions``: how many deductions and fixed penalties it gave (every run counted; a fixed penalty
  listed twice counts twice: each listing quotes evidence);
- ``by_kind``: how their evidence was found in the case (:mod:`consensus_eval.domain.grounding`:
  ``exact``, ``normalised``, ``fuzzy``, ``not_found``, ``empty`` = no quote given);
- ``ungrounded``: the share not grounded (``not_found`` + ``empty``) with its 95% Wilson interval
  (:func:`consensus_eval.analysis.intervals.proportion`);
- ``claim_mismatch``: the share of its runs that claimed a score or stars (``claimed_runs``) whose
  claim differs from the score re-derived from all its deductions (:attr:`DimensionScore.claim_mismatch`;
  under ``ungrounded: drop`` the comparison is with every deduction the judge gave, before the drop),
  with its Wilson interval. A judge that never claims (the rules judge) has ``n = 0`` and no value.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from consensus_eval.analysis.derived import evidence_ids
from consensus_eval.analysis.intervals import Proportion, proportion
from consensus_eval.domain.grounding import GroundingKind
from consensus_eval.execution.stored_run import StoredRun

KINDS: tuple[GroundingKind, ...] = ("exact", "normalised", "fuzzy", "not_found", "empty")


class JudgeQuality(BaseModel):
    """One judge's grounding and arithmetic over a run (module docstring says what each figure counts).

    ``ok_runs`` is the number of its successful calls; ``claimed_runs`` of them made a claim.
    """

    judge: str
    ok_runs: int
    deductions: int
    by_kind: dict[str, int]
    ungrounded: Proportion
    claimed_runs: int
    claim_mismatch: Proportion


def judge_quality(run: StoredRun) -> dict[str, JudgeQuality]:
    """Per judge (panel order): deductions by grounding kind, the share ungrounded and the
    claimed-vs-derived mismatch rate, each share with its 95% Wilson interval."""
    counts = QualityCounts(run.judges)
    counts.add(run)
    return counts.quality()


class QualityCounts:
    """What :func:`judge_quality` counts, added a part of a run at a time (counts: in any order, the same figures)."""

    def __init__(self, judges: Sequence[str]) -> None:
        self.judges = list(judges)
        self.kinds: dict[str, dict[str, int]] = {j: dict.fromkeys(KINDS, 0) for j in judges}
        self.ok_runs = dict.fromkeys(judges, 0)
        self.claimed = dict.fromkeys(judges, 0)
        self.mismatched = dict.fromkeys(judges, 0)

    def add(self, run: StoredRun) -> None:
        """Count the ok runs of ``run`` (a run, or a part of one: some of its cases with their calls).

        Args:
            run: The stored run, derived and grounded.
        """
        kinds, ok_runs, claimed, mismatched = self.kinds, self.ok_runs, self.claimed, self.mismatched
        found = run.grounding.get
        judged, derived = run.judged_scores.get, run.scores.get
        for r in run.records:
            score = judged(r.request_hash) or derived(r.request_hash)    # run.score_as_judged, inlined
            if score is None or r.judge not in kinds:
                continue
            ok_runs[r.judge] += 1
            if score.claimed_score is not None or score.claimed_stars is not None:
                claimed[r.judge] += 1
                mismatched[r.judge] += score.claim_mismatch
            k = kinds[r.judge]
            for did in evidence_ids(r):
                g = found(did)
                if g is not None:
                    k[g.kind] += 1

    def merge(self, other: QualityCounts) -> None:
        """Add what ``other`` counted (another part of the run).

        Args:
            other: Counts of the same judges.
        """
        for j in self.judges:
            for kind, n in other.kinds[j].items():
                self.kinds[j][kind] += n
            self.ok_runs[j] += other.ok_runs[j]
            self.claimed[j] += other.claimed[j]
            self.mismatched[j] += other.mismatched[j]

    def quality(self) -> dict[str, JudgeQuality]:
        """Per judge (panel order), the figures of what was counted (:func:`judge_quality`)."""
        out = {}
        for j in self.judges:
            k = self.kinds[j]
            n = sum(k.values())
            out[j] = JudgeQuality(
                judge=j, ok_runs=self.ok_runs[j], deductions=n, by_kind=k,
                ungrounded=proportion(k["not_found"] + k["empty"], n),
                claimed_runs=self.claimed[j], claim_mismatch=proportion(self.mismatched[j], self.claimed[j]))
        return out
