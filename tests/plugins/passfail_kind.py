"""A rubric kind added from outside the package: one module, one registration (docs/kinds.md's example).

``kind: passfail``: a judge says whether the note passes the dimension's test (``pass_when``, the kind's own field)
or fails it, with the quote it rests on. The score is 1 or 0; agreement is nominal; judges that split (some pass,
some fail) flag the case (``pf_split``), and two reviewers who differ send it to adjudication. The report gets a
**Pass/fail** block (each judge's pass rate per dimension), the review pages show the two levels as two buttons
(the kind shows its judgments as a level of a scale, :attr:`PassFail.anchors`), and the kind brings its words in
English and Chinese (:attr:`PassFail.messages`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, create_model, model_validator

from consensus_eval import UsageError
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.kinds import Dimension, register_kind
from consensus_eval.domain.kinds.base import (
    VIEW_LEVELS,
    AnyJudgment,
    B,
    Flag,
    JudgeScoreView,
    Reason,
    Reply,
    ReportKit,
    RunView,
    Table,
    literal_of,
    reply_name,
)
from consensus_eval.domain.scores import DimensionScore

#: a judge passes a dimension when the mean of its runs' scores is at least this
PASS_MEAN = 0.5


class PassFail(Dimension):
    """A ``passfail`` dimension: pass (1) or fail (0) against ``pass_when``."""

    kind: Literal["passfail"] = "passfail"
    max: float = 1
    #: what a note must do to pass, as the judge is told
    pass_when: str

    alpha_level = "nominal"
    view = VIEW_LEVELS
    flag_texts: ClassVar[Mapping[str, str]] = {"pf_split": "{dimension}: judges split pass/fail ({value:g} pass)"}
    messages: ClassVar[Mapping[str, Mapping[str, str]]] = {
        "en": {"h_passfail": "Pass/fail", "passfail_intro": "How often each judge passed each pass/fail dimension.",
               "col_passes": "passes", "col_pass_rate": "pass rate",
               "flag_pf_split": "{dim}: judges split pass/fail ({value} pass)",
               "why_pf_split": "judges split pass/fail on {subjects}", "reason_pf_split": "judges split pass/fail",
               "r_pf_split": "pass/fail split", "con_why_pf_split": "pass/fail",
               "con_reason_pf_split": "pass/fail split"},
        "zh": {"h_passfail": "通过/不通过", "passfail_intro": "每位评审在每个通过/不通过维度上的通过率。",
               "col_passes": "通过次数", "col_pass_rate": "通过率",
               "flag_pf_split": "{dim}：评审通过与否不一致（{value} 个通过）",
               "why_pf_split": "评审在 {subjects} 上通过与否不一致", "reason_pf_split": "评审通过与否不一致",
               "r_pf_split": "通过分歧", "con_why_pf_split": "通过", "con_reason_pf_split": "通过分歧"},
    }

    @model_validator(mode="after")
    def _one_point(self) -> Self:
        if self.max != 1:
            raise UsageError(f"a passfail dimension scores 1 or 0: its max is 1, got {self.max:g}")
        return self

    @property
    def anchors(self) -> Mapping[int, str]:
        """The two levels: 0 fail, 1 pass."""
        return {0: "fail", 1: f"pass: {self.pass_when}"}

    def reply_model(self, case_criteria: Sequence[Criterion] | None = None) -> type[Reply]:
        """``verdict`` (pass or fail), the ``quote`` it rests on, and a comment."""
        return create_model(
            reply_name(self),
            __base__=PassFailReply,
            verdict=(literal_of(["pass", "fail"]), Field(description=f"pass when: {self.pass_when}"[:2000])),
            quote=(str, Field(description="a verbatim quote of the record or conversation the verdict rests on")),
            comment=(str, Field(description="a short comment")),
        )

    def derive(self, judgment: AnyJudgment, case_criteria: Sequence[Criterion] | None = None) -> DimensionScore:
        """1 for a pass, 0 for a fail."""
        if judgment.rating not in (0, 1):
            raise UsageError(f"dimension {self.id!r} is pass (1) or fail (0), got {judgment.rating!r}")
        score = float(judgment.rating)
        return DimensionScore(dimension=self.id, max=1.0, score=score, stars=self.stars_for(score), categories=(),
                              penalties=0.0, **self.claims(judgment))

    def export_fields(self, judgment: AnyJudgment | None, score: DimensionScore | None, call: str,
                      where: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """``verdict`` (pass, fail; None for a failed call) and the quote with its grounding."""
        if judgment is None:
            return {"verdict": None, "evidence": []}
        return {"verdict": "pass" if judgment.rating == 1 else "fail",
                "evidence": [{"quote": e, **where(f"{call}#e{i}")} for i, e in enumerate(judgment.evidence)]}

    def flags(self, judges: Sequence[JudgeScoreView], config: ConsensusConfig) -> list[Flag]:
        """``pf_split``: some judges pass the case, some fail it (each judge by the mean of its runs)."""
        verdicts = [m >= PASS_MEAN for j in judges if (m := j.mean) is not None]
        if len(set(verdicts)) == 2:
            return [Flag(code="pf_split", value=sum(verdicts), limit=len(verdicts), dimension=self.id)]
        return []

    def reviewers_apart(self, gap: float, config: ConsensusConfig) -> bool:
        """One reviewer passes, the other fails."""
        return gap >= PASS_MEAN

    @classmethod
    def review_reason(cls, flagged: Sequence[tuple[str, Flag, Sequence[str]]]) -> Reason | None:
        """``pf_split``: the dimensions the judges split on."""
        if not flagged:
            return None
        subjects = [name for name, _, _ in flagged]
        return Reason(subjects, f"judges split pass/fail on {', '.join(subjects)}")

    @classmethod
    def report_block(cls, dims: Sequence[Self], run: RunView, kit: ReportKit[B]) -> B | None:
        """**Pass/fail**: per dimension and judge, its passes among its successful runs and the pass rate."""
        wanted = {d.id for d in dims}
        counts: dict[tuple[str, str], list[int]] = {}
        for r in run.records:
            if r.status == "ok" and r.judgment is not None and r.dimension in wanted:
                counts.setdefault((r.dimension, r.judge), []).append(r.judgment.rating or 0)
        t = kit.t
        rows = [[d.name, j, str(sum(got)), str(len(got)), kit.percent(sum(got) / len(got) if got else None)]
                for d in dims for j in run.judges for got in [counts.get((d.id, j), [])]]
        table = Table("passfail-table", [t("col_dimension"), t("col_judge"), t("col_passes"), "n",
                                         t("col_pass_rate")], rows, [False, False, True, True, True])
        return kit.block("passfail", t("h_passfail"), paragraphs=[t("passfail_intro")], tables=[table])


class PassFailReply(Reply):
    """A ``passfail`` dimension's reply (:meth:`PassFail.reply_model`)."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        quote: str = self.quote  # type: ignore[attr-defined]
        return Judgment(dimension=dimension.id, rating=1 if self.verdict == "pass" else 0,  # type: ignore[attr-defined]
                        evidence=[quote] if quote else [], comment=self.comment)  # type: ignore[attr-defined]


register_kind(PassFail)
