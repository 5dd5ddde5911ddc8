"""When two reviewers' own scores send a case to adjudication: on a likert dimension by the panel's flag rule
(levels ``consensus.flag_level_gap`` or more apart, default 2), on a deductions dimension more than 2 points apart,
on a criteria one more than ``flag_spread_share`` of its range: each kind's rule (``Dimension.reviewers_apart``)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.flags import disagreement
from consensus_eval.domain.kinds.base import ADJUDICATE_GAP, JudgeScoreView
from consensus_eval.domain.kinds.likert import levels_apart
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.execution.store import Store
from consensus_eval.review.app import messages
from consensus_eval.review.model import ReviewRun
from tests.kinds_human_run import build_kinds_run


def test_reviewers_are_apart_on_a_likert_dimension_by_the_panels_level_rule() -> None:
    default, wide = ConsensusConfig(), ConsensusConfig(flag_level_gap=3)
    assert default.flag_level_gap == 2 and ADJUDICATE_GAP == 2
    pdqi9 = load_rubric("pdqi9")
    likert, deductions = pdqi9.dimensions[0], load_rubric("medical_record").dimensions[0]
    criteria = load_rubric("criteria").dimensions[0]
    assert [likert.reviewers_apart(g, default) for g in (0, 1, 2, 3, 4)] == [False, False, True, True, True]
    assert [likert.reviewers_apart(g, wide) for g in (0, 1, 2, 3, 4)] == [False, False, False, True, True]
    # deductions: more than 2 points, whatever flag_level_gap says
    for cfg in (default, wide):
        assert [deductions.reviewers_apart(g, cfg) for g in (0, 2, 2.5, 6)] == [False, False, True, True]
    # criteria (a 0-1 score): more than flag_spread_share (0.1) of the range, so two reviewers a criterion apart are
    assert [criteria.reviewers_apart(g, default) for g in (0, 0.1, 0.11, 0.5)] == [False, False, True, True]
    # the same rule as the panel's level_gap flag, gap for gap
    for cfg in (default, wide):
        for low, high in ((3, 3), (3, 4), (3, 5), (1, 5), (2, 5)):
            views: list[JudgeScoreView] = [_Mean(low), _Mean(high)]
            flagged = any(f.code == "level_gap"
                          for f in disagreement(pdqi9, [], {}, cfg, judges={likert.id: views}))
            assert flagged == levels_apart(high - low, cfg) == likert.reviewers_apart(high - low, cfg)


class _Mean:
    """A judge's mean rating, as the flags read it."""

    def __init__(self, mean: float) -> None:
        self.mean: float | None = mean
        self.criteria: dict[str, bool] = {}


@pytest.fixture(scope="module")
def likert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("likert"), "likert", n_cases=6)


def _needs_adjudication(folder: Path, li: dict[str, int], wang: dict[str, int]) -> tuple[bool, float | None]:
    with closing(ReviewRun.open(folder)) as r:
        for name, levels in (("li", li), ("wang", wang)):
            r.apply(name, {"op": "scores", "case": 1, "scores": levels, "accepted": []})
        case_id = r.case_at(1).case_id
        (row,) = [c for c in r.team_progress()[1] if c.audit.case_id == case_id]
        assert row.conflicts == 0 and set(row.states.values()) == {"done"}
        return row.needs_adjudication, row.gap


def _copy(run: Path, to: Path, **consensus: Any) -> Path:
    to.mkdir()
    (to / "results.sqlite").write_bytes((run / "results.sqlite").read_bytes())
    if consensus:
        with Store(to / "results.sqlite") as store:
            config = store.get_meta("config")
            assert isinstance(config, dict)
            store.set_meta("config", {**config, "consensus": {**config.get("consensus", {}), **consensus}})
    return to


def test_two_reviewers_two_levels_apart_on_a_likert_attribute_go_to_adjudication(likert_run: Path,
                                                                                    tmp_path: Path) -> None:
    base = {"accurate": 3, "thorough": 3, "organized": 3}
    two = {**base, "accurate": 5}
    one = {**base, "thorough": 4}
    # 2 levels apart is the panel's default flag_level_gap (not the 2-point rule of other kinds: 3 levels on 1-5)
    assert _needs_adjudication(_copy(likert_run, tmp_path / "a"), base, two) == (True, 2)
    assert _needs_adjudication(_copy(likert_run, tmp_path / "b"), base, one) == (False, 1)
    assert _needs_adjudication(_copy(likert_run, tmp_path / "c"), base, base) == (False, 0)
    # the config's flag_level_gap is the rule: at 3, two levels apart do not need adjudication, three do
    assert _needs_adjudication(_copy(likert_run, tmp_path / "d", flag_level_gap=3), base, two) == (False, 2)
    three = {**base, "organized": 1, "thorough": 4}
    assert _needs_adjudication(_copy(likert_run, tmp_path / "e", flag_level_gap=3), three, {**base, "organized": 4}) \
        == (True, 3)


def test_the_optional_reference_text_names_the_level_rule_in_both_languages(likert_run: Path) -> None:
    with closing(ReviewRun.open(likert_run)) as r:
        assert r.gap_wording == "_levels" and r.level_gap == 2
    for lang in ("en", "zh"):
        t = messages(lang)
        points = t("adjudicate_scores_optional")
        levels = t("adjudicate_scores_optional_levels", levels="2")
        mixed = t("adjudicate_scores_optional_mixed", levels="2")
        assert "2" in levels and "2" in mixed and len({points, levels, mixed}) == 3
    assert "fewer than 2 levels" in messages("en")("adjudicate_scores_optional_levels", levels="2")
