"""The review queue says when a case is done in the words of the rubric's kinds: a score for every dimension,
a verdict on every criterion (own or accepted) for a criteria rubric, both for a rubric that mixes them."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from consensus_eval.review.app import create_app, messages
from consensus_eval.review.model import ReviewRun
from tests.kinds_human_run import build_kinds_run, kinds_rubric


def _queue(folder: Path, lang: str) -> str:
    with closing(ReviewRun.open(folder)) as review:
        app, sessions = create_app(review, reviewer="alice", lang=lang)
        with TestClient(app, base_url="http://127.0.0.1:8765") as c:
            assert c.get(f"/?token={sessions.token}", follow_redirects=False).status_code == 303
            return c.get("/").text


@pytest.mark.parametrize("kind, wording", [("likert", ""), ("criteria", "_criteria")])
def test_the_queue_says_when_a_case_is_done_in_the_words_of_the_rubric(tmp_path: Path, kind: str,
                                                                      wording: str) -> None:
    folder = build_kinds_run(tmp_path / kind, kind, n_cases=4)
    for lang in ("en", "zh"):
        t = messages(lang)
        page = _queue(folder, lang)
        assert str(escape(t("done_rule" + wording))) in page
        assert f'title="{escape(t("progress_title" + wording))}"' in page
        for other in {"", "_criteria", "_mixed"} - {wording}:
            assert str(escape(t("done_rule" + other))) not in page
    en = messages("en")
    if kind == "criteria":
        assert "criterion" in en("done_rule_criteria") and "score" not in en("done_rule_criteria")
    else:
        assert "score for every dimension" in en("done_rule")


def test_a_rubric_with_criteria_beside_other_kinds_says_both() -> None:
    likert, criteria = kinds_rubric("likert"), kinds_rubric("criteria")
    mixed = likert.model_copy(update={"dimensions": [*likert.dimensions,
                                                     *[d for d in criteria.dimensions if d.verdict_items()]]})
    assert mixed.kinds == {"likert", "criteria"}

    def wording(rubric: object) -> str:
        run = cast(ReviewRun, SimpleNamespace(results=SimpleNamespace(rubric=rubric)))
        return cast(str, ReviewRun.done_wording.fget(run))  # type: ignore[attr-defined]

    assert (wording(likert), wording(criteria), wording(mixed)) == ("", "_criteria", "_mixed")
    for lang in ("en", "zh"):
        t = messages(lang)
        texts = {t(f"{key}{w}") for key in ("done_rule", "progress_title") for w in ("", "_criteria", "_mixed")}
        assert len(texts) == 6                          # every wording its own text, in both languages
    en = messages("en")
    assert "score for every dimension" in en("done_rule_mixed") and "every criterion" in en("done_rule_mixed")
