"""The ``likert`` rubric kind: a scale of ``levels`` (consecutive integers, e.g. 1-5), each with its anchor text.
The judge picks a level, with quotes it rests on; the score is that level (``max`` is the top level).

Agreement is ordinal (Krippendorff's alpha of the ratings). Judges whose ratings (each judge's mean over its runs)
are ``consensus.flag_level_gap`` or more levels apart flag the case (``level_gap``); the same gap between a
judge's own runs asks it again (adaptive runs), and between two reviewers sends the case to adjudication.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, create_model, model_validator

from consensus_eval._errors import UsageError
from consensus_eval.domain.config import ConsensusConfig, EvalConfig
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.kinds.base import (
    EPS,
    VIEW_LEVELS,
    AnyJudgment,
    B,
    Dimension,
    Flag,
    JudgeScoreView,
    NoFixedPenalties,
    Reason,
    Reply,
    ReportKit,
    RunView,
    Table,
    fmt_number,
    fmt_short,
    literal_of,
    reply_name,
)
from consensus_eval.domain.kinds.item_errors import ErrorCase, ErrorInput, ItemError, comments_on
from consensus_eval.domain.scores import DimensionScore


def levels_apart(gap: float, config: ConsensusConfig) -> bool:
    """Whether two ratings of a ``likert`` dimension ``gap`` levels apart are a dispute: ``flag_level_gap`` or
    more levels (default 2)."""
    return gap >= config.flag_level_gap


class Likert(Dimension):
    """A ``likert`` dimension (module docstring): the level a judge picks among ``levels``."""

    kind: Literal["likert"] = "likert"
    fixed_penalties: NoFixedPenalties = Field(default_factory=list)
    #: level -> its anchor text, consecutive integer levels (``{1: "not at all", ..., 5: "extremely"}``)
    levels: dict[int, str] = Field(default_factory=dict)

    alpha_level = "ordinal"
    view = VIEW_LEVELS
    flag_texts: ClassVar[Mapping[str, str]] = {"level_gap": "{dimension} ratings differ by {value:g} levels"}

    @model_validator(mode="before")
    @classmethod
    def _derived_max(cls, data: Any) -> Any:
        """The top level is the ``max``, unless given."""
        if isinstance(data, dict) and "max" not in data:
            try:
                return {**data, "max": max(int(k) for k in data["levels"])}
            except (KeyError, TypeError, ValueError):   # no levels, or not integers: their own error says so,
                return {**data, "max": 1}                # with no "max: Field required" beside it
        return data

    @model_validator(mode="after")
    def _check(self) -> Likert:
        levels = sorted(self.levels)
        if len(levels) < 2 or levels != list(range(levels[0], levels[-1] + 1)):
            raise UsageError(f"a likert dimension needs levels: at least two consecutive integers with their "
                             f"anchor text (1: ..., 5: ...), got {levels}")
        if abs(self.max - levels[-1]) > EPS:
            raise UsageError(f"a likert dimension's max is its top level {levels[-1]}, got {fmt_number(self.max)}")
        return self

    @property
    def level_range(self) -> tuple[int, int]:
        """The lowest and highest level (``(1, 5)``)."""
        return min(self.levels), max(self.levels)

    @property
    def anchors(self) -> Mapping[int, str]:
        """The levels and their anchor texts."""
        return self.levels

    @property
    def low(self) -> float:
        """The lowest level."""
        return float(min(self.levels))

    def reply_model(self, case_criteria: Sequence[Criterion] | None = None) -> type[Reply]:
        """The level picked (``rating``, one of the dimension's levels), verbatim quotes it rests on
        (``evidence``) and a comment."""
        levels = sorted(self.levels)
        anchors = "; ".join(f"{k}: {self.levels[k]}" for k in levels)
        return create_model(
            reply_name(self),
            __base__=LikertReply,
            rating=(literal_of(levels), Field(description=f"the level that fits, one of {levels} ({anchors})"[:2000])),
            evidence=(list[str],
                      Field(description="verbatim quotes of the record or conversation the rating rests on")),
            comment=(str, Field(description="a short comment")),
        )

    def derive(self, judgment: AnyJudgment, case_criteria: Sequence[Criterion] | None = None) -> DimensionScore:
        """The level picked."""
        if judgment.rating is None or judgment.rating not in self.levels:
            raise UsageError(f"dimension {self.id!r} takes a level among {sorted(self.levels)}, "
                             f"got {judgment.rating!r}")
        score = float(judgment.rating)
        return DimensionScore(dimension=self.id, max=float(self.max), score=score, stars=self.stars_for(score),
                              categories=(), penalties=0.0, **self.claims(judgment))

    def export_fields(self, judgment: AnyJudgment | None, score: DimensionScore | None, call: str,
                      where: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """The ``rating`` and its ``evidence`` quotes, each with its grounding."""
        return {"rating": judgment.rating if judgment else None,
                "evidence": [{"quote": e, **where(f"{call}#e{i}")} for i, e in enumerate(judgment.evidence)]
                if judgment else []}

    def runs_disagree(self, scores: Sequence[float], config: EvalConfig) -> bool:
        """Ratings ``consensus.flag_level_gap`` or more levels apart (points of a deductions scale mean nothing on a
        1-5 one)."""
        return levels_apart(max(scores) - min(scores), config.consensus)

    def item_errors(self, data: ErrorInput) -> list[ItemError]:
        """The rating against the clinicians' score: above it a miss (too lenient), below it a false alarm; the
        points are the levels apart, the evidence the judge's quotes, the reason its comment."""
        human = data.review.human.get(self.id)
        if human is None or data.panel is None:
            return []
        found = []
        panel = data.panel
        for rater in [data.panel_name, *data.calls]:
            value = (panel.scores.get(self.id) if rater == data.panel_name
                     else panel.judges[rater][self.id].mean if rater in panel.judges else None)
            if value is None or value != value or value == human:
                continue
            calls = data.calls.get(rater, [])
            quotes = [q for r in calls if r.judgment for q in r.judgment.evidence]
            reason = next((r.judgment.comment for r in calls if r.judgment and r.judgment.comment), None)
            found.append(ItemError(rater, self.id, self.name, ErrorCase(
                case_id=data.case_id, kind="miss" if value > human else "false_alarm", points=abs(value - human),
                judge=None if rater == data.panel_name else rater, evidence="; ".join(dict.fromkeys(quotes)),
                reason=reason, comment=comments_on(data.review, self.id))))
        return found

    def flags(self, judges: Sequence[JudgeScoreView], config: ConsensusConfig) -> list[Flag]:
        """``level_gap``: the judges' ratings (each judge's mean) ``flag_level_gap`` or more levels apart."""
        r = [m for j in judges if (m := j.mean) is not None]
        if len(r) >= 2 and levels_apart(max(r) - min(r), config):
            return [Flag(code="level_gap", value=max(r) - min(r), limit=config.flag_level_gap, dimension=self.id)]
        return []

    def reviewers_apart(self, gap: float, config: ConsensusConfig) -> bool:
        """The panel's rule: levels ``flag_level_gap`` or more apart."""
        return levels_apart(gap, config)

    @classmethod
    def review_reason(cls, flagged: Sequence[tuple[str, Flag, Sequence[str]]]) -> Reason | None:
        """``level_gap``: each attribute with its judges' ratings apart, and the config's gap."""
        if not flagged:
            return None
        gap = flagged[0][1].limit
        subjects = [f"{name} {fmt_short(f.value)}" for name, f, _ in flagged]
        return Reason(subjects, f"judges' ratings differ by {fmt_short(gap)} levels or more: {', '.join(subjects)}",
                      limit=gap)

    @classmethod
    def report_block(cls, dims: Sequence[Self], run: RunView, kit: ReportKit[B]) -> B | None:
        """**Ratings**: per attribute and judge, how many of its ratings (every successful run) fell on each level
        of the scale, their mean and count; the anchor text of each level below the table."""
        levels = sorted({lv for d in dims for lv in d.levels})
        counts: dict[tuple[str, str], dict[int, int]] = {}
        wanted = {d.id for d in dims}
        for r in run.records:
            if r.status == "ok" and r.judgment is not None and r.dimension in wanted and r.judgment.rating is not None:
                per = counts.setdefault((r.dimension, r.judge), {})
                per[r.judgment.rating] = per.get(r.judgment.rating, 0) + 1
        rows = []
        for d in dims:
            for j in run.judges:
                per = counts.get((d.id, j), {})
                n = sum(per.values())
                mean = sum(lv * k for lv, k in per.items()) / n if n else None
                rows.append([d.name, j, *(str(per.get(lv, 0)) if lv in d.levels else "" for lv in levels),
                             str(n), kit.fixed(mean)])
        t = kit.t
        table = Table("ratings-table", [t("col_attribute"), t("col_judge"), *map(str, levels), "n", t("col_mean")],
                      rows, [False, False, *([True] * (len(levels) + 2))])
        return kit.block("ratings", t("h_ratings"), paragraphs=[t("ratings_intro")], tables=[table],
                         notes=[t("ratings_anchors", name=d.name,
                                  anchors="; ".join(f"{lv} = {a}" for lv, a in sorted(d.levels.items())))
                                for d in dims])


class LikertReply(Reply):
    """A ``likert`` dimension's reply (:meth:`Likert.reply_model`). The rating is the score
    (:meth:`Likert.derive` checks it again)."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        return Judgment(dimension=dimension.id, rating=self.rating,  # type: ignore[attr-defined]
                        evidence=list(self.evidence), comment=self.comment)  # type: ignore[attr-defined]
