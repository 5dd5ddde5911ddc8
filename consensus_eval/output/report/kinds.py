"""The report's sections per rubric kind, as language-neutral blocks (:class:`~.trust.Block`) rendered the same
by report.md and report.html: a ``likert`` rubric's ratings distribution per attribute and judge, a
``criteria`` rubric's met rates per criterion and the criteria its judges split on. A rubric of deductions
only has neither (its report is what it was).

- **Ratings** (``likert``): per attribute and judge, how many of its ratings (every successful run) fell on
  each level of the scale, their mean and count; the anchor text of each level below the table.
- **Criteria** (``criteria``): per criterion (of the rubric, or each case's own; the same id in several
  cases is one row), the cases it was judged on, the share the panel found it met (its majority; a tie is
  ``split``, not counted), each judge's share met (its majority over its runs), how many cases the judges'
  verdicts differ on, and on how many the panel is split evenly. Criteria the judges disagree on most come
  first; at most :data:`MAX_CRITERIA` rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from consensus_eval.analysis.results import Results
from consensus_eval.domain.rubric import Dimension
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, TableBlock
from consensus_eval.output.report.i18n import Messages

#: rows of the criteria table at most (the criteria the judges disagree on most are kept)
MAX_CRITERIA = 60


def kinds_blocks(results: Results, t: Messages) -> list[Block]:
    """The per-kind sections of a run's report (empty for a rubric of deductions only)."""
    rubric = results.rubric
    likert = [d for d in rubric.dimensions if d.kind == "likert"]
    criteria = [d for d in rubric.dimensions if d.kind == "criteria"]
    out = []
    if likert:
        out.append(ratings_block(results, likert, t))
    if criteria:
        out.append(criteria_block(results, criteria, t))
    return out


def ratings_block(results: Results, dims: Sequence[Dimension], t: Messages) -> Block:
    """Ratings per likert attribute and judge (module docstring)."""
    levels = sorted({lv for d in dims for lv in d.levels})
    counts: dict[tuple[str, str], dict[int, int]] = {}
    wanted = {d.id for d in dims}
    for r in results.records:
        if r.status == "ok" and r.judgment is not None and r.dimension in wanted and r.judgment.rating is not None:
            per = counts.setdefault((r.dimension, r.judge), {})
            per[r.judgment.rating] = per.get(r.judgment.rating, 0) + 1
    rows = []
    for d in dims:
        for j in results.judges:
            per = counts.get((d.id, j), {})
            n = sum(per.values())
            mean = sum(lv * k for lv, k in per.items()) / n if n else None
            rows.append([d.name, j, *(str(per.get(lv, 0)) if lv in d.levels else "" for lv in levels),
                         str(n), fmt.fixed(mean)])
    block = Block("ratings", t("h_ratings"), paragraphs=[t("ratings_intro")])
    block.tables.append(TableBlock("ratings-table", [t("col_attribute"), t("col_judge"), *map(str, levels),
                                                     "n", t("col_mean")],
                                   rows, [False, False, *([True] * (len(levels) + 2))]))
    block.notes += [t("ratings_anchors", name=d.name, anchors="; ".join(f"{lv} = {a}" for lv, a in
                                                                         sorted(d.levels.items())))
                    for d in dims]
    return block


@dataclass
class _Tally:
    text: str
    points: float
    cases: int = 0
    panel_met: int = 0
    panel_decided: int = 0
    judge_met: dict[str, int] = field(default_factory=dict)
    judge_n: dict[str, int] = field(default_factory=dict)
    disagree: int = 0
    panel_split: int = 0


def criteria_block(results: Results, dims: Sequence[Dimension], t: Messages) -> Block:
    """Met rates per criterion and the criteria the judges split on (module docstring)."""
    cases = {c.id: c for c in results.cases}
    tallies: dict[tuple[str, str], _Tally] = {}
    for c in results.consensus:
        case = cases.get(c.case_id)
        for d in dims:
            crits = d.criteria or (case.criteria if case else None) or []
            panel = c.criteria.get(d.id, {})
            for crit in crits:
                verdicts = {j: per[d.id].criteria[crit.id] for j, per in c.judges.items()
                            if d.id in per and crit.id in per[d.id].criteria}
                said = panel.get(crit.id)
                if not verdicts and said is None:
                    continue
                tl = tallies.setdefault((d.id, crit.id), _Tally(crit.text, float(crit.points)))
                tl.cases += 1
                if said in ("met", "not met"):
                    tl.panel_decided += 1
                    tl.panel_met += said == "met"
                elif said == "split":
                    tl.panel_split += 1
                for j, met in verdicts.items():
                    tl.judge_n[j] = tl.judge_n.get(j, 0) + 1
                    tl.judge_met[j] = tl.judge_met.get(j, 0) + met
                tl.disagree += len(set(verdicts.values())) > 1
    names = {d.id: d.name for d in dims}
    order = {key: i for i, key in enumerate(tallies)}
    ranked = sorted(tallies.items(), key=lambda kv: (-kv[1].disagree / max(kv[1].cases, 1), order[kv[0]]))
    rows = []
    for (dim_id, cid), tl in ranked[:MAX_CRITERIA]:
        rows.append([names[dim_id], f"{cid}: {tl.text}", fmt.num(tl.points), str(tl.cases),
                     fmt.percent(tl.panel_met / tl.panel_decided) if tl.panel_decided else fmt.DASH,
                     *(fmt.percent(tl.judge_met[j] / tl.judge_n[j]) if tl.judge_n.get(j) else fmt.DASH
                       for j in results.judges),
                     str(tl.disagree), str(tl.panel_split)])
    block = Block("criteria", t("h_criteria"), paragraphs=[t("criteria_intro")])
    split = [f"{cid} ({names[dim_id]})" for (dim_id, cid), tl in ranked if tl.disagree]
    if split:
        block.paragraphs.append(t("criteria_split", n=len(split), criteria=", ".join(split[:10])))
    else:
        block.paragraphs.append(t("criteria_no_split"))
    block.tables.append(TableBlock("criteria-table", [t("col_dimension"), t("col_criterion"), t("col_points"),
                                                      t("col_cases"), t("col_panel_met"),
                                                      *(t("col_judge_met", judge=j) for j in results.judges),
                                                      t("col_judges_differ"), t("col_panel_split")],
                                   rows, [False, False, *([True] * (len(results.judges) + 5))]))
    if len(ranked) > MAX_CRITERIA:
        block.notes.append(t("criteria_more", shown=MAX_CRITERIA, n=len(ranked)))
    return block
