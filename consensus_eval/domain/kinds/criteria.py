"""The ``criteria`` rubric kind (HealthBench's shape): criteria with signed points, from the rubric (``criteria``)
or from each case's own ``criteria``. The judge marks each met or not met, with a quote; the score is::

    score = clip(sum of met criteria's points / sum of positive points, 0, 1)     (``max`` is 1)

Agreement is nominal (Krippendorff's alpha of the met / not met verdicts, one unit per case and criterion). A
judge's verdict on a criterion is its majority over its runs; the judges split on a criterion when their verdicts
differ, and a case is flagged (``split``) when they split on at least ``consensus.flag_split_share`` of a
dimension's criteria, one at least (:func:`splits_needed`). The panel's verdict on a criterion is its majority,
``split`` only on a tie (:func:`majority`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from consensus_eval._errors import UsageError
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import CriterionVerdict, Judgment
from consensus_eval.domain.kinds.base import (
    EPS,
    VIEW_CRITERIA,
    AnyJudgment,
    B,
    ConsensusView,
    Dimension,
    Flag,
    JudgeScoreView,
    NoFixedPenalties,
    Reason,
    Reply,
    ReportKit,
    RunView,
    Table,
    check_unique,
    default_is,
    fmt_number,
    list_of,
    literal_of,
    reply_name,
)
from consensus_eval.domain.kinds.item_errors import ErrorCase, ErrorInput, ItemError, comments_on, decided
from consensus_eval.domain.scores import CriterionResult, DimensionScore
from consensus_eval.domain.stored import StoredVerdict

#: the panel's verdict on one criterion: met by more than half of the judges that answered, not met by
#: more than half, or ``split`` (a tie)
Majority = Literal["met", "not met", "split"]


def majority(verdicts: Sequence[bool]) -> Majority | None:
    """The panel's verdict on one criterion from the verdicts of the judges that answered (each judge's own
    majority over its runs): ``met`` by more than half, ``not met`` by more than half, else ``split``;
    None when nobody answered."""
    if not verdicts:
        return None
    met = sum(verdicts)
    if 2 * met > len(verdicts):
        return "met"
    if 2 * met < len(verdicts):
        return "not met"
    return "split"


def split_criteria(verdicts: Mapping[str, Sequence[bool]]) -> list[str]:
    """The criteria the judges disagree on, in order: ``verdicts`` is criterion id -> each judge's own verdict
    (its majority over its runs; a judge whose runs split evenly gives none); a criterion is split when its
    verdicts are not all the same."""
    return [cid for cid, v in verdicts.items() if len(set(v)) > 1]


def splits_needed(n_criteria: int, config: ConsensusConfig) -> int:
    """How many of a criteria dimension's ``n_criteria`` criteria the judges must disagree on for the case to be
    flagged: ``flag_split_share`` of them, rounded up, and one at least."""
    return max(1, math.ceil(config.flag_split_share * n_criteria - 1e-9))


def criteria_of(dimension: Dimension, case_criteria: Sequence[Criterion] | None) -> list[Criterion]:
    """The criteria a ``criteria`` dimension judges a case by: the rubric's own, else the case's. Raises
    ``ValueError`` when there are none (or ``dimension`` is of another kind)."""
    found = list((dimension.criteria if isinstance(dimension, Criteria) else None) or case_criteria or [])
    if not found:
        raise UsageError(f"dimension {dimension.id!r} has no criteria of its own and the case gives none "
                         f"(a case's \"criteria\": [{{\"id\", \"text\", \"points\"}}])")
    return found


class Criteria(Dimension):
    """A ``criteria`` dimension (module docstring): met points over positive points, in [0, 1]."""

    kind: Literal["criteria"] = "criteria"
    fixed_penalties: NoFixedPenalties = Field(default_factory=list)
    #: the rubric's own criteria; empty: each case brings its ``criteria``
    criteria: Annotated[list[Criterion], Field(default_factory=list, exclude_if=default_is([]))]

    alpha_level = "nominal"
    by_criteria = True
    view = VIEW_CRITERIA
    flag_texts: ClassVar[Mapping[str, str]] = {"split": "{dimension}: judges split on {value:g} criteria"}

    @model_validator(mode="before")
    @classmethod
    def _derived_max(cls, data: Any) -> Any:
        """The ``max`` is 1, unless given."""
        return {**data, "max": 1} if isinstance(data, dict) and "max" not in data else data

    @model_validator(mode="after")
    def _check(self) -> Criteria:
        if abs(self.max - 1) > EPS:
            raise UsageError(f"a criteria dimension scores 0-1 (met points over positive points): max is 1, "
                             f"got {fmt_number(self.max)}")
        check_unique("criterion", (c.id for c in self.criteria))
        if self.criteria and not any(c.points > 0 for c in self.criteria):
            raise UsageError("a criteria dimension needs at least one criterion with positive points")
        return self

    @property
    def uses_case_criteria(self) -> bool:
        """Without criteria of its own, each case's."""
        return not self.criteria

    def judged_criteria(self, case_criteria: Sequence[Criterion] | None) -> list[Criterion]:
        """Its own criteria, else the case's (none when neither has any)."""
        return list(self.criteria or case_criteria or [])

    def verdict_items(self) -> list[str]:
        """The rubric's own criteria (a case's own have no column: they differ from case to case)."""
        return [c.id for c in self.criteria]

    def case_key(self, case_criteria: Sequence[Criterion] | None) -> tuple[str, ...]:
        """The ids of the case's criteria, when they are the ones judged (ValueError when there are none)."""
        return tuple(c.id for c in criteria_of(self, case_criteria)) if self.uses_case_criteria else ()

    def reply_model(self, case_criteria: Sequence[Criterion] | None = None) -> type[Reply]:
        """One verdict per criterion of the case (ids a closed set, each exactly once: a reply missing one or
        giving one twice fails validation and is re-asked) and a comment."""
        ids = tuple(c.id for c in criteria_of(self, case_criteria))
        verdict = create_model(
            reply_name(self, "Verdict"),
            __config__=ConfigDict(extra="forbid"),
            id=(literal_of(list(ids)), Field(description="criterion id")),
            met=(bool, Field(description="true when the record meets the criterion (for a negative criterion: "
                                         "when the fault it names is there)")),
            evidence=(str, Field(description="verbatim quote from the record or conversation")),
            reason=(str, Field(description="why it is met or not")),
        )

        def _each_once(self: BaseModel) -> BaseModel:
            seen = [v.id for v in self.verdicts]  # type: ignore[attr-defined]
            twice = sorted({i for i in seen if seen.count(i) > 1})
            missing = [i for i in ids if i not in seen]
            if twice or missing:
                parts = ([f"criteria judged more than once: {', '.join(twice)}"] if twice else []) + (
                    [f"criteria not judged: {', '.join(missing)}"] if missing else [])
                raise UsageError("give exactly one verdict per criterion; " + "; ".join(parts))
            return self

        return create_model(
            reply_name(self),
            __base__=CriteriaReply,
            __validators__={"_each_once": model_validator(mode="after")(_each_once)},  # type: ignore[dict-item]
            verdicts=(list_of(verdict), Field(description=f"one verdict per criterion, each of {list(ids)} once")),
            comment=(str, Field(description="a short comment")),
        )

    def derive(self, judgment: AnyJudgment, case_criteria: Sequence[Criterion] | None = None) -> DimensionScore:
        """Met points over positive points, clipped to [0, 1]; each criterion judged exactly once."""
        criteria = criteria_of(self, case_criteria)
        by_id = {c.id: c for c in criteria}
        met: dict[str, bool] = {}
        for v in judgment.verdicts:
            if v.id not in by_id:
                raise UsageError(f"dimension {self.id!r} has no criterion {v.id!r} for this case")
            if v.id in met:
                raise UsageError(f"criterion {v.id!r} is judged twice")
            met[v.id] = v.met
        missing = [c.id for c in criteria if c.id not in met]
        if missing:
            raise UsageError(f"criteria not judged: {', '.join(missing)}")
        positive = sum(c.points for c in criteria if c.points > 0)
        achieved = sum(c.points for c in criteria if met[c.id])
        score = min(1.0, max(0.0, achieved / positive))
        score = round(score, 12)
        return DimensionScore(dimension=self.id, max=1.0, score=score, stars=self.stars_for(score),
                              categories=(), penalties=0.0, **self.claims(judgment),
                              criteria=tuple(CriterionResult(c.id, float(c.points), met[c.id]) for c in criteria))

    def export_fields(self, judgment: AnyJudgment | None, score: DimensionScore | None, call: str,
                      where: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """Each criterion's ``verdict`` with its points (from the scoring), evidence, reason and grounding."""
        points = {c.id: c.points for c in score.criteria} if score else {}
        verdicts: Sequence[CriterionVerdict | StoredVerdict] = judgment.verdicts if judgment else ()
        return {"verdicts": [{"id": v.id, "met": v.met, "points": points.get(v.id), "evidence": v.evidence,
                              "reason": v.reason, **where(f"{call}#v{i}")} for i, v in enumerate(verdicts)]}

    def agreement_values(self, cons: Sequence[ConsensusView], judges: Sequence[str],
                         case_criteria: Mapping[str, Sequence[Criterion] | None]) -> list[list[float | None]]:
        """One value per case x criterion (the criteria that apply to the case, in their order): 1 met, 0 not
        met, None no verdict (a judge's verdict: its majority over its runs)."""
        units = [(c, k.id) for c in cons for k in (self.criteria or case_criteria.get(c.case_id) or [])]
        return [[(float(v) if (v := c.judges[j][self.id].criteria.get(cid)) is not None else None)
                 for c, cid in units] for j in judges]

    def item_errors(self, data: ErrorInput) -> list[ItemError]:
        """The clinicians' verdict on each criterion (the adjudicator's, else the reviewers' when they all gave the
        same) against each judge's (its first run's) and the panel's majority (none on a tie). A fault is a positive
        criterion not met or a negative one met: the clinicians' fault the rater did not see is a miss, the rater's
        the clinicians did not see a false alarm; the points are the criterion's."""
        mine = {r: v[self.id] for r, v in data.review.criteria.items() if self.id in v}
        found = []
        for crit in self.judged_criteria(data.case_criteria):
            given = {r: v[crit.id] for r, v in mine.items() if crit.id in v}
            met = decided({r: str(v) for r, v in given.items()},
                          None if (ref := data.review.reference_criteria.get(self.id, {}).get(crit.id)) is None
                          else str(ref))
            if met is None:
                continue
            fault = (met == "True") != (crit.points > 0)
            said: dict[str, tuple[bool, str, str]] = {}
            for judge, calls in data.calls.items():
                v = next((v for r in calls for v in (r.judgment.verdicts if r.judgment else []) if v.id == crit.id),
                         None)
                if v is not None:
                    said[judge] = (v.met, v.evidence, v.reason)
            majority = data.panel.criteria.get(self.id, {}).get(crit.id) if data.panel is not None else None
            if majority in ("met", "not met"):
                said[data.panel_name] = (majority == "met", "", "")
            for rater, (j_met, evidence, reason) in said.items():
                if (j_met != (crit.points > 0)) == fault:
                    continue
                found.append(ItemError(rater, crit.id, crit.text, ErrorCase(
                    case_id=data.case_id, kind="miss" if fault else "false_alarm", points=abs(crit.points),
                    judge=None if rater == data.panel_name else rater, evidence=evidence, reason=reason or None,
                    comment=comments_on(data.review, self.id))))
        return found

    def flags(self, judges: Sequence[JudgeScoreView], config: ConsensusConfig) -> list[Flag]:
        """``split``: the judges disagree on at least :func:`splits_needed` of the criteria with a verdict."""
        by_id: dict[str, list[bool]] = {}
        for j in judges:
            for cid, met in j.criteria.items():
                by_id.setdefault(cid, []).append(met)
        n = len(split_criteria(by_id))
        if n and n >= (need := splits_needed(len(by_id), config)):
            return [Flag(code="split", value=n, limit=need, dimension=self.id)]
        return []


    @classmethod
    def review_reason(cls, flagged: Sequence[tuple[str, Flag, Sequence[str]]]) -> Reason | None:
        """``split``: each criterion the judges disagree on (``Dimension: id``), and how many."""
        subjects = [f"{name}: {i}" for name, _, items in flagged for i in items]
        if not subjects:
            return None
        n = len(subjects)
        return Reason(subjects, f"the judges disagree on {n} criterion{'s' if n != 1 else ''}: {', '.join(subjects)}",
                      value=n)

    @classmethod
    def report_block(cls, dims: Sequence[Self], run: RunView, kit: ReportKit[B]) -> B | None:
        """**Criteria**: per criterion (of the rubric, or each case's own; the same id in several cases is one
        row), the cases it was judged on, the share the panel found it met (its majority; a tie is ``split``, not
        counted), each judge's share met (its majority over its runs), how many cases the judges' verdicts differ
        on, and on how many the panel is split evenly. Criteria the judges disagree on most come first; at most
        :data:`MAX_CRITERIA` rows."""
        cases = {c.id: c for c in run.cases}
        tallies: dict[tuple[str, str], _Tally] = {}
        for c in run.consensus:
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
                    tl.add(said, verdicts)
        names = {d.id: d.name for d in dims}
        order = {key: i for i, key in enumerate(tallies)}
        ranked = sorted(tallies.items(), key=lambda kv: (-kv[1].disagree / max(kv[1].cases, 1), order[kv[0]]))
        rows = []
        for (dim_id, cid), tl in ranked[:MAX_CRITERIA]:
            rows.append([names[dim_id], f"{cid}: {tl.text}", kit.num(tl.points), str(tl.cases),
                         kit.percent(tl.panel_met / tl.panel_decided) if tl.panel_decided else kit.num(None),
                         *(kit.percent(tl.judge_met[j] / tl.judge_n[j]) if tl.judge_n.get(j) else kit.num(None)
                           for j in run.judges),
                         str(tl.disagree), str(tl.panel_split)])
        t = kit.t
        split = [f"{cid} ({names[dim_id]})" for (dim_id, cid), tl in ranked if tl.disagree]
        said = (t("criteria_split", n=len(split), criteria=", ".join(split[:10])) if split
                else t("criteria_no_split"))
        table = Table("criteria-table", [t("col_dimension"), t("col_criterion"), t("col_points"), t("col_cases"),
                                         t("col_panel_met"), *(t("col_judge_met", judge=j) for j in run.judges),
                                         t("col_judges_differ"), t("col_panel_split")],
                      rows, [False, False, *([True] * (len(run.judges) + 5))])
        more = [t("criteria_more", shown=MAX_CRITERIA, n=len(ranked))] if len(ranked) > MAX_CRITERIA else []
        return kit.block("criteria", t("h_criteria"), paragraphs=[t("criteria_intro"), said], tables=[table],
                         notes=more)


#: rows of the report's criteria table at most (the criteria the judges disagree on most are kept)
MAX_CRITERIA = 60


@dataclass
class _Tally:
    """One criterion across the cases, as the report's criteria table counts it."""

    text: str
    points: float
    cases: int = 0
    panel_met: int = 0
    panel_decided: int = 0
    judge_met: dict[str, int] = field(default_factory=dict)
    judge_n: dict[str, int] = field(default_factory=dict)
    disagree: int = 0
    panel_split: int = 0

    def add(self, said: str | None, verdicts: Mapping[str, bool]) -> None:
        """One case: the panel's verdict on the criterion and each judge's."""
        self.cases += 1
        if said in ("met", "not met"):
            self.panel_decided += 1
            self.panel_met += said == "met"
        elif said == "split":
            self.panel_split += 1
        for j, met in verdicts.items():
            self.judge_n[j] = self.judge_n.get(j, 0) + 1
            self.judge_met[j] = self.judge_met.get(j, 0) + met
        self.disagree += len(set(verdicts.values())) > 1


class CriteriaReply(Reply):
    """A ``criteria`` dimension's reply (:meth:`Criteria.reply_model`). The score is re-derived from the verdicts
    and the criteria's points, never taken from the judge."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        return Judgment(dimension=dimension.id, comment=self.comment,  # type: ignore[attr-defined]
                        verdicts=[CriterionVerdict(id=v.id, met=v.met, evidence=v.evidence, reason=v.reason)
                                  for v in self.verdicts])  # type: ignore[attr-defined]
