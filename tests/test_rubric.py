"""The rubric as data (seed 000, DESIGN.md "Decisions on the seed 000 rubric") and score derivation.

Expected values are computed by hand from the seed and DESIGN.md; each computation is in a comment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from consensus_eval import InputError
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds import Deductions
from consensus_eval.domain.replies import response_model
from consensus_eval.domain.rubric import Category, DeductionType, Rubric, load_rubric
from consensus_eval.domain.scoring import derive
from tests.helpers import present

BAD = Path(__file__).parent / "data" / "bad"
RUBRIC = load_rubric("medical_record")


def _judgment(dim: str, *deductions: tuple[str, str, float], penalties: tuple[str, ...] = (),
              claimed_score: float | None = None, claimed_stars: int | None = None) -> Judgment:
    return Judgment(
        dimension=dim,
        deductions=[Deduction(category=c, type=t, points=p) for c, t, p in deductions],
        fixed_penalties=[PenaltyHit(id=p) for p in penalties],
        claimed_score=claimed_score, claimed_stars=claimed_stars,
    )


# --------------------------------------------------------------------------- the bundled rubric


def test_bundled_rubric_dimensions_maxima_weights() -> None:
    assert RUBRIC.id == "medical_record"
    assert [d.id for d in RUBRIC.dimensions] == ["accuracy", "completeness", "standardization"]
    assert [RUBRIC.dimension(d).max for d in ("accuracy", "completeness", "standardization")] == [40, 35, 25]
    # seed: 5 stars x 8 / x 7 / x 5
    assert [d.star_weight for d in RUBRIC.dimensions] == [8, 7, 5]
    assert RUBRIC.max_total == 100  # 40 + 35 + 25


CAPS = {  # DESIGN.md decision 1
    "accuracy": {"numbers": 8, "drugs": 10, "timeline": 8, "diagnosis": 8, "course": 6},
    "completeness": {"chief_complaint": 7, "present_illness": 14, "past_history": 7,
                     "family_history": 4, "personal_history": 3},
    "standardization": {"terminology": 8, "structure": 7, "drug_writing": 5, "time_expression": 3,
                        "professionalism": 2},
}


@pytest.mark.parametrize("dim", list(CAPS))
def test_bundled_rubric_caps(dim: str) -> None:
    d = RUBRIC.dimension(dim, Deductions)
    assert {c.id: c.cap for c in d.categories} == CAPS[dim]
    # 8+10+8+8+6 = 40; 7+14+7+4+3 = 35; 8+7+5+3+2 = 25
    assert sum(CAPS[dim].values()) == d.max


@pytest.mark.parametrize(("dim", "thresholds"), [
    ("accuracy", {5: 38, 4: 32, 3: 24, 2: 16}),
    ("completeness", {5: 34, 4: 28, 3: 21, 2: 14}),
    ("standardization", {5: 24, 4: 20, 3: 15, 2: 10}),
])
def test_bundled_rubric_star_thresholds(dim: str, thresholds: dict[int, float]) -> None:
    assert RUBRIC.dimension(dim).stars == thresholds


def test_bundled_rubric_fixed_penalty() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    assert [(p.id, p.points) for p in acc.fixed_penalties] == [("diabetes_in_past_history", 10)]
    assert RUBRIC.dimension("completeness", Deductions).fixed_penalties == []
    assert RUBRIC.dimension("standardization", Deductions).fixed_penalties == []


@pytest.mark.parametrize(("dim", "type_id", "points"), [
    # fixed points, from the seed's 扣分规则
    ("accuracy", "value_error", 2), ("accuracy", "unit_error", 1), ("accuracy", "value_missing", 1.5),
    ("accuracy", "drug_name_error", 3), ("accuracy", "usage_error", 1.5),
    ("accuracy", "time_order_confused", 3), ("accuracy", "logic_error", 1.5),
    ("completeness", "cc_symptom_missing", 4), ("completeness", "pi_treatment_missing", 4),
    ("completeness", "fh_absent", 4), ("standardization", "structure_confused", 3),
    # ranges: "扣1-2分" -> [1, 2], "扣2-3分" -> [2, 3]
    ("completeness", "cc_nonstandard", (1, 2)), ("completeness", "ph_important_missing", (2, 3)),
    ("completeness", "personal_unrecorded", (1, 2)), ("standardization", "hierarchy_missing", (1, 2)),
    ("standardization", "unprofessional", (1, 2)),
])
def test_bundled_rubric_type_points(dim: str, type_id: str, points: float | tuple[float, float]) -> None:
    _, typ = RUBRIC.dimension(dim, Deductions).find_type(type_id)
    assert typ.points == points
    assert typ.is_range == isinstance(points, tuple)


def test_range_type_accessors() -> None:
    _, typ = RUBRIC.dimension("completeness", Deductions).find_type("ph_important_missing")
    assert (typ.low, typ.high, typ.points_text()) == (2, 3, "2-3")
    assert typ.accepts(2) and typ.accepts(2.5) and typ.accepts(3)
    assert not typ.accepts(1.9) and not typ.accepts(3.1)
    _, fixed = RUBRIC.dimension("accuracy", Deductions).find_type("value_missing")
    assert (fixed.low, fixed.high, fixed.points_text()) == (1.5, 1.5, "1.5")
    assert fixed.accepts(1.5) and not fixed.accepts(2)


def test_bundled_rubric_found_by_path_from_another_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_rubric("configs/rubrics/medical_record.yaml") == RUBRIC
    assert load_rubric("medical_record").fingerprint == RUBRIC.fingerprint


# --------------------------------------------------------------------------- loader errors


@pytest.mark.parametrize(("name", "expected"), [
    # caps 5 + 4 = 9, max 10; the message shows the sum and names the dimension
    ("rubric_caps.yaml", ["dimensions[0 quality]", "caps sum to 9", "facts 5 + style 4", "maximum 10"]),
    ("rubric_thresholds.yaml", ["dimensions[0 quality]", "decrease strictly", "[9.0, 7.0, 7.0, 3.0]"]),
    ("rubric_thresholds_range.yaml", ["dimensions[0 quality]", "[12.0, 7.0, 5.0, 3.0]", "within 0..10"]),
    ("rubric_duplicate_category.yaml", ["dimensions[0 quality]", "duplicate category id(s): facts"]),
    ("rubric_duplicate_type.yaml", ["dimensions[0 quality]", "duplicate deduction type id(s): fact_wrong"]),
    ("rubric_duplicate_dimension.yaml", ["duplicate dimension id(s): quality"]),
    ("rubric_range_reversed.yaml",
     ["dimensions[0 quality].categories[1 style].types[0 style_poor].points", "low <= high"]),
    ("rubric_unknown_field.yaml", ["dimensions[0 quality].categories[1 style].kap", "Extra inputs"]),
    ("rubric_invalid_yaml.yaml", ["not valid YAML", "line 6"]),
    ("rubric_not_mapping.yaml", ["must be a mapping"]),
])
def test_loader_errors_name_file_and_field(name: str, expected: list[str]) -> None:
    path = BAD / name
    with pytest.raises(InputError) as ei:
        load_rubric(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}:"), msg
    for part in expected:
        assert part in msg, f"{part!r} not in {msg!r}"


def _mini(**dim_overrides: Any) -> dict[str, Any]:
    dim: dict[str, Any] = {
        "id": "quality", "name": "Quality", "max": 10, "stars": {5: 9, 4: 7, 3: 5, 2: 3},
        "categories": [
            {"id": "facts", "name": "Facts", "cap": 6, "types": [{"id": "fact_wrong", "name": "W", "points": 2}]},
            {"id": "style", "name": "Style", "cap": 4, "types": [{"id": "style_poor", "name": "P", "points": [1, 2]}]},
        ],
    }
    dim.update(dim_overrides)
    return {"id": "mini", "name": "Mini", "dimensions": [dim]}


def _write(tmp_path: Path, data: dict[str, Any] | str) -> Path:
    p = tmp_path / "rubric.yaml"
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")  # JSON is YAML
    return p


def test_mini_rubric_is_valid(tmp_path: Path) -> None:
    r = load_rubric(_write(tmp_path, _mini()))
    assert r.dimension("quality").max == 10


def test_threshold_below_zero(tmp_path: Path) -> None:
    p = _write(tmp_path, _mini(stars={5: 9, 4: 7, 3: 5, 2: -1}))
    with pytest.raises(InputError, match=r"dimensions\[0 quality\]: star thresholds .* within 0\.\.10") as ei:
        load_rubric(p)
    assert str(ei.value).startswith(str(p))


def test_threshold_equal_to_max_is_allowed(tmp_path: Path) -> None:
    # thresholds are "at least": 5 stars only at the full 10 is legal
    r = load_rubric(_write(tmp_path, _mini(stars={5: 10, 4: 7, 3: 5, 2: 0})))
    assert r.dimension("quality").stars_for(10) == 5
    assert r.dimension("quality").stars_for(9.5) == 4


def test_threshold_missing_star(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"5, 4, 3 and 2 stars"):
        load_rubric(_write(tmp_path, _mini(stars={5: 9, 4: 7, 3: 5})))


def test_caps_over_the_max_show_the_sum(tmp_path: Path) -> None:
    cats = _mini()["dimensions"][0]["categories"]
    cats[0]["cap"] = 7.5  # 7.5 + 4 = 11.5 > 10
    with pytest.raises(InputError, match=r"caps sum to 11\.5 \(facts 7\.5 \+ style 4\), not the maximum 10"):
        load_rubric(_write(tmp_path, _mini(categories=cats)))


def test_duplicate_category_across_dimensions(tmp_path: Path) -> None:
    data = _mini()
    second = json.loads(json.dumps(data["dimensions"][0]))
    second["id"] = "other"
    second["categories"][0]["types"][0]["id"] = "fact_wrong_2"
    second["categories"][1]["types"][0]["id"] = "style_poor_2"
    data["dimensions"].append(second)  # categories facts/style appear in both dimensions
    with pytest.raises(InputError, match=r"duplicate category id\(s\): facts, style"):
        load_rubric(_write(tmp_path, data))


@pytest.mark.parametrize("points", [0, -1, [0, 1], [1, 2, 3]])
def test_bad_points(tmp_path: Path, points: object) -> None:
    cats = _mini()["dimensions"][0]["categories"]
    cats[1]["types"][0]["points"] = points
    with pytest.raises(InputError, match=r"categories\[1 style\]\.types\[0 style_poor\]\.points"):
        load_rubric(_write(tmp_path, _mini(categories=cats)))


def test_missing_rubric_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="rubric file not found") as ei:
        load_rubric(p)
    assert str(p) in str(ei.value)
    with pytest.raises(InputError, match="no_such_rubric"):
        load_rubric("no_such_rubric")


def test_missing_required_field(tmp_path: Path) -> None:
    data = _mini()
    del data["dimensions"][0]["max"]
    with pytest.raises(InputError, match=r"dimensions\[0 quality\]\.max: Field required"):
        load_rubric(_write(tmp_path, data))


def test_required_sections_must_be_listed(tmp_path: Path) -> None:
    data = _mini()
    data["sections"] = ["A", "B"]
    data["required_sections"] = ["A", "C"]
    with pytest.raises(InputError, match=r"required_sections \['C'\]"):
        load_rubric(_write(tmp_path, data))


USER_RUBRIC = """\
# A rubric for another task (discharge summaries), written by a user; no code change needed.
id: discharge
name: Discharge summary
dimensions:
  - id: fidelity
    name: Fidelity
    max: 20
    stars: {5: 18, 4: 15, 3: 10, 2: 5}
    categories:
      - id: meds
        name: Medications
        cap: 12
        types:
          - {id: med_wrong, name: Wrong medication, points: 4}
          - {id: med_vague, name: Vague medication, points: [0.5, 1.5]}
      - id: followup
        name: Follow-up
        cap: 8
        types:
          - {id: followup_missing, name: Missing follow-up, points: 8}
    fixed_penalties:
      - {id: wrong_patient, name: Wrong patient, points: 20}
"""


def test_user_written_rubric_for_another_task(tmp_path: Path) -> None:
    r = load_rubric(_write(tmp_path, USER_RUBRIC))
    dim = r.dimension("fidelity")
    assert dim.star_weight == 0 and r.max_total == 20
    # med_wrong 4 + med_wrong 4 + med_vague 1.5 = 9.5 (< cap 12) -> 20 - 9.5 = 10.5 -> 3 stars (>= 10)
    s = derive(dim, _judgment("fidelity", ("meds", "med_wrong", 4), ("meds", "med_wrong", 4),
                              ("meds", "med_vague", 1.5)))
    assert (s.score, s.stars) == (10.5, 3)
    # followup_missing 8 (= cap) + the wrong-patient penalty 20 -> 20 - 8 - 20 < 0 -> floor 0
    s = derive(dim, _judgment("fidelity", ("followup", "followup_missing", 8), penalties=("wrong_patient",)))
    assert (s.score, s.stars, s.penalties) == (0, 1, 20)
    # the LLM response model is built from it too
    reply = response_model(r, "fidelity").model_validate(
        {"deductions": [{"category": "meds", "type": "med_vague", "points": 1, "evidence": "", "reason": ""}],
         "fixed_penalties": [], "score": 19, "stars": 5, "comment": ""})
    assert derive(dim, reply.to_judgment(dim)).score == 19  # 20 - 1


# --------------------------------------------------------------------------- derive: worked example


def test_seed_worked_example() -> None:
    acc, comp, std = (RUBRIC.dimension(d) for d in ("accuracy", "completeness", "standardization"))
    # accuracy: one timeline time_error, 2 points -> 40 - 2 = 38 -> 5 stars (>= 38)
    a = derive(acc, _judgment("accuracy", ("timeline", "time_error", 2), claimed_score=38, claimed_stars=5))
    assert (a.score, a.stars, a.claim_mismatch) == (38, 5, False)
    timeline = next(c for c in a.categories if c.id == "timeline")
    assert (timeline.deducted, timeline.taken, timeline.n) == (2, 2, 1)
    # completeness: recent 4 + initial diagnosis 3 = 7 -> 35 - 7 = 28 -> 4 stars (28 <= 28 < 34)
    c = derive(comp, _judgment("completeness", ("present_illness", "pi_recent_missing", 4),
                               ("present_illness", "pi_initial_diagnosis_missing", 3),
                               claimed_score=28, claimed_stars=4))
    assert (c.score, c.stars, c.claim_mismatch) == (28, 4, False)
    # standardization: unprofessional 2 -> 25 - 2 = 23 -> 4 stars (20 <= 23 < 24); the judge claimed 5
    s = derive(std, _judgment("standardization", ("professionalism", "unprofessional", 2),
                              claimed_score=23, claimed_stars=5))
    assert (s.score, s.stars) == (23, 4)
    assert s.claim_mismatch is True
    assert a.score + c.score + s.score == 89  # 38 + 28 + 23
    # the seed's star formula on the derived stars: 5*8 + 4*7 + 4*5 = 40 + 28 + 20 = 88
    assert RUBRIC.star_total({"accuracy": present(a.stars), "completeness": present(c.stars),
                              "standardization": present(s.stars)}) == 88
    # ... and on the stars the seed's example claims (5/4/5): 40 + 28 + 25 = 93
    assert RUBRIC.star_total({"accuracy": 5, "completeness": 4, "standardization": 5}) == 93
    assert RUBRIC.total_stars({"accuracy": 38, "completeness": 28, "standardization": 23}) == {
        "accuracy": 5, "completeness": 4, "standardization": 4}


def test_claim_mismatch_on_score_only() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    # 40 - 2 = 38 (5 stars); the judge claims 36 with 5 stars
    s = derive(acc, _judgment("accuracy", ("timeline", "time_error", 2), claimed_score=36, claimed_stars=5))
    assert s.claim_mismatch is True
    assert derive(acc, _judgment("accuracy")).claim_mismatch is False  # no claim, nothing to compare


# --------------------------------------------------------------------------- derive: caps and floor


def _biggest_type(cat: Category) -> DeductionType:
    return max(cat.types, key=lambda t: t.high)


CATEGORY_PARAMS = [(d.id, c.id) for d in RUBRIC.dimensions_of(Deductions) for c in d.categories]


@pytest.mark.parametrize(("dim_id", "cat_id"), CATEGORY_PARAMS)
def test_every_category_cap(dim_id: str, cat_id: str) -> None:
    dim = RUBRIC.dimension(dim_id, Deductions)
    cat = dim.categories_by_id[cat_id]
    typ = _biggest_type(cat)
    # enough occurrences of the category's largest type to exceed its cap
    # (e.g. numbers: value_error 2 x 5 = 10 > cap 8 -> takes 8 -> 40 - 8 = 32)
    n = math.floor(cat.cap / typ.high) + 1
    assert n * typ.high > cat.cap
    s = derive(dim, _judgment(dim_id, *[(cat_id, typ.id, typ.high)] * n))
    got = next(c for c in s.categories if c.id == cat_id)
    assert got.deducted == pytest.approx(n * typ.high)
    assert got.taken == cat.cap
    assert got.n == n
    assert s.score == dim.max - cat.cap
    # other categories take nothing
    assert all(c.taken == 0 for c in s.categories if c.id != cat_id)


@pytest.mark.parametrize(("dim_id", "deductions", "expected"), [
    # numbers: value_error 2 x 5 = 10 -> capped at 8 -> 40 - 8 = 32
    ("accuracy", [("numbers", "value_error", 2)] * 5, 32),
    # drugs: drug_name_error 3 x 4 = 12 -> 10 -> 30
    ("accuracy", [("drugs", "drug_name_error", 3)] * 4, 30),
    # course: logic_error 1.5 x 5 = 7.5 -> 6 -> 34
    ("accuracy", [("course", "logic_error", 1.5)] * 5, 34),
    # numbers below the cap: 2 + 1 + 1.5 = 4.5 -> 35.5
    ("accuracy", [("numbers", "value_error", 2), ("numbers", "unit_error", 1), ("numbers", "value_missing", 1.5)],
     35.5),
    # present illness 4 + 4 + 3 + 3 + 2 = 16 -> 14; family history absent 4 + diabetes missing 3 = 7 -> 4
    # 35 - 14 - 4 = 17
    ("completeness", [("present_illness", "pi_treatment_missing", 4), ("present_illness", "pi_recent_missing", 4),
                      ("present_illness", "pi_initial_diagnosis_missing", 3),
                      ("present_illness", "pi_complications_missing", 3), ("present_illness", "pi_incomplete", 2),
                      ("family_history", "fh_absent", 4), ("family_history", "fh_diabetes_missing", 3)], 17),
    # professionalism: unprofessional 2 + 1.5 = 3.5 -> 2; time_vague 1 x 4 = 4 -> 3; 25 - 2 - 3 = 20
    ("standardization", [("professionalism", "unprofessional", 2), ("professionalism", "unprofessional", 1.5)]
     + [("time_expression", "time_vague", 1)] * 4, 20),
])
def test_caps_hand_computed(dim_id: str, deductions: list[tuple[str, str, float]], expected: float) -> None:
    assert derive(RUBRIC.dimension(dim_id), _judgment(dim_id, *deductions)).score == expected


def _all_over_caps(dim: Deductions) -> list[tuple[str, str, float]]:
    out = []
    for c in dim.categories:
        t = _biggest_type(c)
        out += [(c.id, t.id, t.high)] * (math.floor(c.cap / t.high) + 1)
    return out


@pytest.mark.parametrize("dim_id", ["accuracy", "completeness", "standardization"])
def test_floor_at_zero(dim_id: str) -> None:
    dim = RUBRIC.dimension(dim_id, Deductions)
    # every category over its cap: max - sum(caps) = max - max = 0; never negative
    s = derive(dim, _judgment(dim_id, *_all_over_caps(dim)))
    assert s.score == 0 and s.stars == 1
    assert sum(c.taken for c in s.categories) == dim.max


def test_fixed_penalty_outside_caps() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    pen = ("diabetes_in_past_history",)
    # all five categories over their caps: 40 - 40 = 0 even before the penalty; 0 - 10 floors at 0
    s = derive(acc, _judgment("accuracy", *_all_over_caps(acc), penalties=pen))
    assert (s.score, s.penalties) == (0, 10)
    # only the penalty: 40 - 10 = 30 -> 3 stars (24 <= 30 < 32)
    s = derive(acc, _judgment("accuracy", penalties=pen))
    assert (s.score, s.stars, s.penalties) == (30, 3, 10)
    assert all(c.taken == 0 for c in s.categories)
    # numbers capped at 8 (value_error 2 x 6 = 12 -> 8) plus the penalty: 40 - 8 - 10 = 22 -> 2 stars
    s = derive(acc, _judgment("accuracy", *[("numbers", "value_error", 2)] * 6, penalties=pen))
    assert (s.score, s.stars) == (22, 2)
    numbers = next(c for c in s.categories if c.id == "numbers")
    assert (numbers.deducted, numbers.taken) == (12, 8)


def test_fixed_penalty_counts_once() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    # seed: 糖尿病写入既往史 "直接扣10分" is one fixed penalty, not per occurrence: 40 - 10 = 30
    s = derive(acc, _judgment("accuracy", penalties=("diabetes_in_past_history", "diabetes_in_past_history")))
    assert s.score == 30


# --------------------------------------------------------------------------- stars


STAR_PARAMS = [(d.id, star, present(d.stars)[star]) for d in RUBRIC.dimensions for star in (5, 4, 3, 2)]


@pytest.mark.parametrize(("dim_id", "star", "threshold"), STAR_PARAMS)
def test_stars_at_and_around_thresholds(dim_id: str, star: int, threshold: float) -> None:
    dim = RUBRIC.dimension(dim_id)
    below = star - 1  # the next lower star (2 stars -> 1 star)
    assert dim.stars_for(threshold) == star                 # "at least"
    assert dim.stars_for(threshold + 0.5) == star           # gaps between thresholds are >= 1
    assert dim.stars_for(threshold - 0.001) == below        # e.g. 37.999 -> 4
    assert dim.stars_for(threshold - 0.5) == below          # e.g. 37.5 -> 4
    assert dim.stars_for(threshold - 1e-6) == below         # well outside the 1e-9 tolerance
    assert dim.stars_for(threshold - 1e-10) == star         # e.g. 37.9999999999 counts as 38 (float noise)


def test_stars_examples() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    assert acc.stars_for(37.999) == 4
    assert acc.stars_for(37.9999999999) == 5
    assert acc.stars_for(40) == 5
    assert acc.stars_for(15.999) == 1
    assert acc.stars_for(0) == 1
    assert RUBRIC.dimension("completeness").stars_for(33.5) == 4  # 28 <= 33.5 < 34
    assert RUBRIC.dimension("standardization").stars_for(9.9) == 1


def test_derive_fractional_scores_and_stars() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    # value_missing 1.5 -> 38.5 -> 5 stars
    s = derive(acc, _judgment("accuracy", ("numbers", "value_missing", 1.5)))
    assert (s.score, s.stars) == (38.5, 5)
    # value_missing 1.5 + unit_error 1 = 2.5 -> 37.5 -> 4 stars
    s = derive(acc, _judgment("accuracy", ("numbers", "value_missing", 1.5), ("numbers", "unit_error", 1)))
    assert (s.score, s.stars) == (37.5, 4)
    # personal_unrecorded 1.1 + 1.2 = 2.3 (float: 2.3000000000000003) -> 35 - 2.3 = 32.7 -> 4 stars
    s = derive(RUBRIC.dimension("completeness"), _judgment(
        "completeness", ("personal_history", "personal_unrecorded", 1.1),
        ("personal_history", "personal_unrecorded", 1.2)))
    assert s.score == pytest.approx(32.7) and s.stars == 4


def test_derive_rounds_float_noise_to_the_integer() -> None:
    comp = RUBRIC.dimension("completeness")
    # 0.1 + 0.2 style noise: personal_unrecorded 1.1 + 1.9 = 3.0000000000000004 -> capped at 3 -> 32
    # cc_nonstandard 1.3 + 1.7 = 3 (float 3.0) -> 35 - 3 - 3 = 29 exactly, stored as an integral float
    s = derive(comp, _judgment("completeness", ("personal_history", "personal_unrecorded", 1.1),
                               ("personal_history", "personal_unrecorded", 1.9),
                               ("chief_complaint", "cc_nonstandard", 1.3),
                               ("chief_complaint", "cc_nonstandard", 1.7)))
    assert s.score == 29 and float(s.score).is_integer()


# --------------------------------------------------------------------------- derive: invalid judgments


def test_deduction_type_from_another_category_raises() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    with pytest.raises(ValueError, match="belongs to category 'timeline', not 'numbers'"):
        derive(acc, _judgment("accuracy", ("numbers", "time_error", 2)))


@pytest.mark.parametrize(("dim_id", "cat", "typ", "points"), [
    ("completeness", "chief_complaint", "cc_nonstandard", 2.5),      # range 1-2
    ("completeness", "chief_complaint", "cc_nonstandard", 0.5),
    ("completeness", "past_history", "ph_important_missing", 1),     # range 2-3
    ("accuracy", "numbers", "value_error", 3),                       # fixed 2
    ("accuracy", "numbers", "value_error", -2),
])
def test_points_out_of_range_raise(dim_id: str, cat: str, typ: str, points: float) -> None:
    with pytest.raises(ValueError, match="outside"):
        derive(RUBRIC.dimension(dim_id), _judgment(dim_id, (cat, typ, points)))


def test_points_within_tolerance_are_accepted() -> None:
    comp = RUBRIC.dimension("completeness")
    # 2 + 1e-12 is 2 within the 1e-9 tolerance: 35 - 2 = 33
    assert derive(comp, _judgment("completeness", ("chief_complaint", "cc_nonstandard", 2 + 1e-12))).score == 33


def test_unknown_type_raises_value_error() -> None:
    with pytest.raises(ValueError):
        derive(RUBRIC.dimension("accuracy"), _judgment("accuracy", ("numbers", "colloquial", 1)))


# --------------------------------------------------------------------------- response models


def _reply(dim_id: str, deductions: list[dict[str, Any]], *, score: float = 38, stars: int = 5,
           **extra: Any) -> dict[str, Any]:
    return {"deductions": [{"evidence": "…", "reason": "…", **d} for d in deductions],
            "score": score, "stars": stars, "comment": "ok", **extra}


def test_response_model_valid_reply_fixed_points_from_rubric() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    M = response_model(RUBRIC, "accuracy")
    reply = M.model_validate(_reply("accuracy", [
        {"category": "timeline", "type": "time_error"},                 # points omitted -> 2 from the rubric
        {"category": "numbers", "type": "value_missing", "points": 1.5},
    ], fixed_penalties=[{"id": "diabetes_in_past_history", "evidence": "既往史：糖尿病"}], score=26.5, stars=3))
    j = reply.to_judgment(acc)
    assert [(d.category, d.type, d.points) for d in j.deductions] == [
        ("timeline", "time_error", 2), ("numbers", "value_missing", 1.5)]
    assert [p.id for p in j.fixed_penalties] == ["diabetes_in_past_history"]
    assert (j.dimension, j.claimed_score, j.claimed_stars, j.comment) == ("accuracy", 26.5, 3, "ok")
    # 40 - 2 - 1.5 - 10 = 26.5 -> 3 stars (24 <= 26.5 < 32): the claim agrees
    s = derive(acc, j)
    assert (s.score, s.stars, s.claim_mismatch) == (26.5, 3, False)


def test_response_model_seed_example_end_to_end() -> None:
    # the seed's example, as replies: 38 + 28 + 23 = 89; the standardization claim (5 stars) is flagged
    replies = {
        "accuracy": _reply("accuracy", [{"category": "timeline", "type": "time_error"}], score=38, stars=5),
        "completeness": _reply("completeness", [
            {"category": "present_illness", "type": "pi_recent_missing"},
            {"category": "present_illness", "type": "pi_initial_diagnosis_missing"}], score=28, stars=4),
        "standardization": _reply("standardization", [
            {"category": "professionalism", "type": "unprofessional", "points": 2}], score=23, stars=5),
    }
    scores = {}
    for dim_id, raw in replies.items():
        dim = RUBRIC.dimension(dim_id)
        scores[dim_id] = derive(dim, response_model(RUBRIC, dim_id).model_validate(raw).to_judgment(dim))
    assert sum(s.score for s in scores.values()) == 89
    assert [s.claim_mismatch for s in scores.values()] == [False, False, True]


def test_response_model_takes_rubric_points_for_fixed_type_even_if_given() -> None:
    acc = RUBRIC.dimension("accuracy", Deductions)
    reply = response_model(RUBRIC, "accuracy").model_validate(
        _reply("accuracy", [{"category": "drugs", "type": "drug_name_error", "points": 3.0}]))
    assert reply.to_judgment(acc).deductions[0].points == 3


@pytest.mark.parametrize(("dim_id", "deduction", "match"), [
    ("accuracy", {"category": "numbers", "type": "no_such_type"}, r"deductions\.0\.type"),
    # a type of another dimension is unknown here
    ("accuracy", {"category": "numbers", "type": "colloquial", "points": 1}, r"deductions\.0\.type"),
    ("accuracy", {"category": "no_such_cat", "type": "value_error"}, r"deductions\.0\.category"),
    # type in the wrong category
    ("accuracy", {"category": "numbers", "type": "time_error"}, "belongs to category 'timeline'"),
    # range type without points, or out of its range
    ("completeness", {"category": "chief_complaint", "type": "cc_nonstandard"}, "takes 1-2 points"),
    ("completeness", {"category": "chief_complaint", "type": "cc_nonstandard", "points": 3}, "takes 1-2 points"),
    ("completeness", {"category": "past_history", "type": "ph_important_missing", "points": 1.5}, "takes 2-3"),
    # fixed type with the wrong points
    ("accuracy", {"category": "numbers", "type": "value_error", "points": 4}, "takes exactly 2 points"),
    ("accuracy", {"category": "numbers", "type": "value_missing", "points": 2}, "takes exactly 1.5 points"),
    # unknown field on a deduction
    ("accuracy", {"category": "numbers", "type": "value_error", "severity": "high"}, "severity"),
])
def test_response_model_rejects_bad_deductions(dim_id: str, deduction: dict[str, Any], match: str) -> None:
    M = response_model(RUBRIC, dim_id)
    with pytest.raises(ValidationError, match=match):
        M.model_validate(_reply(dim_id, [deduction], score=20, stars=2))


def test_response_model_rejects_unknown_fixed_penalty() -> None:
    M = response_model(RUBRIC, "accuracy")
    with pytest.raises(ValidationError, match="fixed_penalties"):
        M.model_validate(_reply("accuracy", [], fixed_penalties=[{"id": "diabetes_in_family_history"}]))


@pytest.mark.parametrize("dim_id", ["completeness", "standardization"])
def test_dimensions_without_penalties_reject_non_empty_list(dim_id: str) -> None:
    M = response_model(RUBRIC, dim_id)
    ok = M.model_validate(_reply(dim_id, [], score=20, stars=4, fixed_penalties=[]))
    assert ok.to_judgment(RUBRIC.dimension(dim_id)).fixed_penalties == []
    for bad in ([{"id": "diabetes_in_past_history"}], [None]):
        with pytest.raises(ValidationError, match="fixed_penalties"):
            M.model_validate(_reply(dim_id, [], score=20, stars=4, fixed_penalties=bad))


@pytest.mark.parametrize(("dim_id", "score", "stars"), [
    ("accuracy", 40.5, 5), ("completeness", 36, 5), ("standardization", 26, 5),  # above max
    ("accuracy", -1, 1), ("accuracy", 30, 0), ("accuracy", 30, 6),
])
def test_response_model_rejects_claims_out_of_bounds(dim_id: str, score: float, stars: int) -> None:
    with pytest.raises(ValidationError):
        response_model(RUBRIC, dim_id).model_validate(_reply(dim_id, [], score=score, stars=stars))


def test_response_model_accepts_max_score() -> None:
    M = response_model(RUBRIC, "standardization")
    assert M.model_validate(_reply("standardization", [], score=25, stars=5)).model_dump()["score"] == 25


def test_response_model_json_schema_lists_closed_enums() -> None:
    for dim in RUBRIC.dimensions_of(Deductions):
        schema = response_model(RUBRIC, dim.id).model_json_schema()
        ded = next(v for k, v in schema["$defs"].items() if k.endswith("Deduction"))
        assert ded["properties"]["category"]["enum"] == [c.id for c in dim.categories]
        assert ded["properties"]["type"]["enum"] == [t.id for c in dim.categories for t in c.types]
        assert ded.get("additionalProperties") is False
        assert schema["properties"]["score"]["maximum"] == dim.max
        if dim.fixed_penalties:
            pen = next(v for k, v in schema["$defs"].items() if k.endswith("Penalty"))
            idp = pen["properties"]["id"]
            # a one-value Literal is rendered as `const`, several as `enum`: either closes the set
            assert idp.get("enum", [idp.get("const")]) == ["diabetes_in_past_history"]
        else:
            assert schema["properties"]["fixed_penalties"]["maxItems"] == 0


def test_response_model_is_cached_per_rubric_content() -> None:
    assert response_model(RUBRIC, "accuracy") is response_model(RUBRIC, "accuracy")
    assert response_model(RUBRIC, "accuracy") is not response_model(RUBRIC, "completeness")


def test_rubric_fingerprint_changes_with_content() -> None:
    data = RUBRIC.model_dump()
    data["dimensions"][0]["categories"][0]["cap"] = 9
    data["dimensions"][0]["categories"][1]["cap"] = 9  # 9 + 9 + 8 + 8 + 6 = 40, still valid
    edited = Rubric.model_validate(data)
    assert edited.fingerprint != RUBRIC.fingerprint
    assert Rubric.model_validate(RUBRIC.model_dump()).fingerprint == RUBRIC.fingerprint


def test_unknown_dimension() -> None:
    with pytest.raises(KeyError, match="no dimension 'style'"):
        RUBRIC.dimension("style")
