"""Grounding (docs/judges.md, 'Grounded evidence'): every deduction's evidence located in the case it quotes.

The search (:mod:`consensus_eval.domain.grounding`), sections, grounding in read_run, ``ungrounded: drop``
and ``reask``, and the fake server's invented quotes coming out ``not_found``.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from consensus_eval.analysis.derived import ground_all, read_run
from consensus_eval.domain import grounding as grounding_module
from consensus_eval.domain.cases import Case, Turn, load_cases
from consensus_eval.domain.config import EvalConfig, LLMJudgeConfig
from consensus_eval.domain.grounding import (
    FUZZY_THRESHOLD,
    CaseGrounder,
    Grounding,
    ground,
    normalise,
    quote_parts,
    reask_prompt,
)
from consensus_eval.domain.judgment import CallOutcome, Deduction, Judgment, PenaltyHit
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Headings, Rubric, load_rubric
from consensus_eval.domain.sections import SectionIndex, Sections, find_sections, fold_width
from consensus_eval.execution.execute import execute
from consensus_eval.execution.store import CallRecord, Store
from consensus_eval.judges.llm import LLMJudge
from tests.conftest import EXAMPLES
from tests.fakellm import INVENTED_MARK, INVENTED_QUOTES, chat_response
from tests.helpers import as_stored, present, write_store

RECORD = ("主诉：口渴、多饮3年，加重1月。\n"
          "现病史：患者3年前体检发现空腹血糖7.9mmol/L，诊断为2型糖尿病，口服二甲双胍 500mg 每日2次。近1月口渴加重。\n"
          "既往史：高血压5年，口服氨氯地平5mg。\n"
          "家族史：父亲患糖尿病。\n"
          "个人史：吸烟20年。\n"
          "体格检查：血压132/82mmHg。")
CONVERSATION = "医生：哪里不舒服？\n患者：口渴，喝水多，晚上起夜两三次。\n患者：我父亲有糖尿病。"


def _text(span_source: str) -> str:
    return RECORD if span_source == "record" else CONVERSATION


#: the medical_record rubric's headings (its data: sections and headings in the rubric's YAML)
SECTIONS = Sections.of(load_rubric("medical_record"))


def _g(quote: str) -> Grounding:
    return ground(quote, RECORD, CONVERSATION, SECTIONS)


# --------------------------------------------------------------------------- the levels


def test_exact_keeps_every_occurrence_in_both_texts() -> None:
    g = _g("口渴")
    assert g.kind == "exact" and g.score == 100 and g.grounded
    where = [(s.source, s.start) for s in g.spans]
    expected = [("record", i) for i in range(len(RECORD)) if RECORD.startswith("口渴", i)]
    expected += [("conversation", i) for i in range(len(CONVERSATION)) if CONVERSATION.startswith("口渴", i)]
    assert where == expected and len(expected) == 3
    for s in g.spans:
        assert _text(s.source)[s.start:s.end] == "口渴"


def test_exact_ignores_surrounding_blanks() -> None:
    g = _g("  高血压5年 \n")
    assert g.kind == "exact" and RECORD[g.spans[0].start:g.spans[0].end] == "高血压5年"


def test_full_width_quote_is_normalised_and_maps_back() -> None:
    g = _g("空腹血糖７．９ｍｍｏｌ／Ｌ")
    assert g.kind == "normalised" and g.score == 100
    (s,) = g.spans
    assert RECORD[s.start:s.end] == "空腹血糖7.9mmol/L"


def test_half_width_quote_of_full_width_record() -> None:
    record = "现病史：空腹血糖７．９ｍｍｏｌ／Ｌ，糖化６．９％。"
    g = ground("糖化6.9%", record, "")
    assert g.kind == "normalised"
    assert record[g.spans[0].start:g.spans[0].end] == "糖化６．９％"


def test_blanks_punctuation_and_quote_marks_are_folded() -> None:
    cases = {
        "二甲双胍500mg每日2次": "二甲双胍 500mg 每日2次",   # blanks dropped
        "口渴,多饮3年": "口渴、多饮3年",                    # 、 and , are one comma
        "“高血压5年”": "高血压5年",                         # quote marks dropped
        "近1月口渴加重.": "近1月口渴加重。",                 # 。 and . are one full stop
    }
    for quote, original in cases.items():
        g = _g(quote)
        assert g.kind in ("normalised", "exact"), quote
        assert any(RECORD[s.start:s.end] == original for s in g.spans), (quote, g)
        assert g.kind == "normalised" or quote == original


def test_normalised_spans_map_back_exactly_on_random_texts() -> None:
    """Independent check of the position map: a span's original text, normalised, is the normalised
    quote, and its ends are not a dropped character (the span is as tight as the match)."""
    rng = random.Random(7)
    alphabet = [*"糖尿病口渴多饮3年7.9mmol/L，。、：；“”（） \u3000", "Ａ", "１", "：", "…"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 60)))
        a = rng.randrange(len(text))
        b = rng.randrange(a, len(text)) + 1
        quote = text[a:b]
        if len(normalise(quote)) < 1:
            continue
        g = ground(quote.replace(" ", "").replace("，", ","), text, "")
        assert g.kind in ("exact", "normalised"), (text, quote)
        for s in g.spans:
            piece = text[s.start:s.end]
            assert normalise(piece) == normalise(quote), (text, quote, piece)
            if g.kind == "normalised":  # the span is as tight as the match: it starts and ends on a kept character
                assert normalise(piece[0]) and normalise(piece[-1]), (text, quote, piece)


def test_fuzzy_particle_added_is_found_with_its_score() -> None:
    g = _g("患者3年前体检时发现空腹血糖7.9")   # 时 added
    assert g.score is not None
    assert g.kind == "fuzzy" and FUZZY_THRESHOLD <= g.score < 100
    (s,) = g.spans
    assert RECORD[s.start:s.end] == "患者3年前体检发现空腹血糖7.9"  # the window fitted to the quote


def test_a_quote_longer_than_the_text_is_not_a_perfect_fuzzy_match() -> None:
    # partial_ratio alone would find the 6-character record inside the quote and score it 100
    assert ground("主诉：口渴多饮三年余伴乏力", "口渴多饮三年", "").kind == "not_found"
    g = ground("口渴多饮三年的", "口渴多饮三年", "")
    assert g.score is not None
    assert g.kind == "fuzzy" and FUZZY_THRESHOLD <= g.score < 100


def test_fuzzy_refuses_a_changed_number() -> None:
    # one character off, but the value is wrong: a wrong quote, not a near one
    assert _g("患者3年前体检发现空腹血糖8.9").kind == "not_found"
    assert _g("吸烟30年").kind == "not_found"


def test_not_found_and_empty() -> None:
    assert _g("青霉素皮试阳性").kind == "not_found"
    assert _g("青霉素皮试阳性").spans == () and _g("青霉素皮试阳性").score is None
    for quote in ("", "   ", "\n", "“”"):
        g = _g(quote)
        assert g.kind == "empty" and not g.grounded and g.spans == ()


def test_short_quotes_are_never_fuzzy() -> None:
    assert _g("渴").kind == "exact"
    assert _g("痛").kind == "not_found"           # one character absent: not found, never "fuzzy"
    assert _g("口干").kind == "not_found"         # two characters, one differs
    assert _g("高血脂").kind == "not_found"       # three characters, one differs (高血压 is there)


def test_fuzzy_threshold_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    quote = "患者3年前体检时发现空腹血糖7.9"
    score = _g(quote).score
    assert score is not None
    monkeypatch.setattr(grounding_module, "FUZZY_THRESHOLD", score)
    assert _g(quote).kind == "fuzzy"
    monkeypatch.setattr(grounding_module, "FUZZY_THRESHOLD", math.nextafter(score, 101))
    assert _g(quote).kind == "not_found"


def test_a_quote_from_the_conversation_as_the_prompt_renders_it(rubric: Rubric) -> None:
    case = Case(id="c", record="主诉：多饮3年。", conversation=[Turn(role="doctor", text="家里人有糖尿病吗？"),
                                                           Turn(role="patient", text="我父亲有糖尿病。")])
    shown = case.conversation_as_text(rubric.roles)
    assert shown in render(rubric, rubric.dimensions[0], case)[1]["content"]  # what the judge saw
    g = ground("患者：我父亲有糖尿病", case.record, shown)
    assert g.kind == "exact"
    (s,) = g.spans
    assert s.source == "conversation" and s.section is None and shown[s.start:s.end] == "患者：我父亲有糖尿病"


# --------------------------------------------------------------------------- quotes in parts


def test_elided_quote_grounds_each_part() -> None:
    g = _g("患者3年前体检发现……诊断为2型糖尿病")
    assert g.kind == "exact"
    pieces = {RECORD[s.start:s.end] for s in g.spans}
    assert pieces == {"患者3年前体检发现", "诊断为2型糖尿病"}


def test_parts_take_the_worst_kind_and_an_invented_part_fails_the_quote() -> None:
    g = _g("高血压5年；空腹血糖７．９")
    assert g.kind == "normalised"
    assert _g("高血压5年；青霉素皮试阳性").kind == "not_found"


def test_quoted_segments_are_the_parts() -> None:
    assert quote_parts("病历写“高血压5年”，对话说“我父亲有糖尿病”") == ["高血压5年", "我父亲有糖尿病"]
    g = _g("病历写“高血压5年”，对话说“我父亲有糖尿病”")
    assert g.kind == "exact" and [s.source for s in g.spans] == ["record", "conversation"]


def test_slash_inside_a_value_or_unit_is_not_a_separator() -> None:
    assert quote_parts("血压132/82mmHg") == ["血压132/82mmHg"]
    assert quote_parts("空腹血糖7.9mmol/L") == ["空腹血糖7.9mmol/L"]
    assert quote_parts("口渴/多饮") == ["口渴", "多饮"]


# --------------------------------------------------------------------------- sections


def test_each_span_gets_its_record_section() -> None:
    want = {"口渴、多饮3年": "主诉", "二甲双胍": "现病史", "氨氯地平": "既往史", "父亲患糖尿病": "家族史",
            "吸烟20年": "个人史", "132/82": "体格检查"}
    for quote, section in want.items():
        g = _g(quote)
        assert [s.section for s in g.spans if s.source == "record"] == [section], quote
    # the heading itself belongs to its section
    assert _g("既往史：高血压").spans[0].section == "既往史"


def test_sections_of_full_width_and_bracketed_headings() -> None:
    record = "【主诉】多饮3年\n1. 现病史：血糖升高\n既往病史：高血压\n其他内容"
    idx = SectionIndex(record, SECTIONS)
    assert [(s.name, s.canonical) for s in idx.sections] == [("主诉", True), ("现病史", True), ("既往史", True)]
    assert idx.at(record.index("多饮")) == "主诉" and idx.at(record.index("血糖")) == "现病史"
    assert idx.at(record.index("其他")) == "既往史"
    assert SectionIndex("多饮3年，无主诉格式", SECTIONS).at(0) is None
    # a rubric without sections finds none
    assert SectionIndex(record, Sections((), Headings())).sections == []


def test_section_finder_reads_folded_text_one_for_one() -> None:
    record = "主诉：多饮3年。现病史：血糖高。"
    folded = fold_width(record)
    assert len(folded) == len(record) and "：" not in folded
    assert [s.name for s in find_sections(folded, SECTIONS)] == ["主诉", "现病史"]


def test_fold_width_of_a_long_text_is_the_one_for_one_nfkc_fold() -> None:
    """A record (long enough to be folded as an array of code points) folds as each character's NFKC form when that
    is one character: checked against unicodedata character by character, at the lengths around the switch, with
    characters outside the basic plane and a lone surrogate (folded by the table) too."""
    import unicodedata

    def oracle(text: str) -> str:
        return "".join(f if len(f := unicodedata.normalize("NFKC", c)) == 1 else c for c in text)

    rng = random.Random(5)
    pool = [*"主诉：（）１２３ＡＢＣ　ﬁ㎏①ｶﾞ，。a\n", *map(chr, range(0xFF00, 0xFFEF)),
            *map(chr, range(0x20, 0x3400, 13))]
    for n in (1, 127, 128, 129, 400, 2000):
        for extra in ("", "\U0001d400", "\ud800"):
            text = "".join(rng.choice(pool) for _ in range(n)) + extra
            assert fold_width(text) == (oracle(text) if extra != "\ud800" else oracle(text[:-1]) + extra)
    assert fold_width("a" * 300) == "a" * 300


def test_the_rules_judge_imports_the_section_finder_from_the_domain() -> None:
    from consensus_eval.judges.rules.medical_record import document

    assert vars(document)["find_sections"] is find_sections  # the name as the rules' document module binds it


# --------------------------------------------------------------------------- a case's grounder


def test_case_grounder_memoises_by_quote() -> None:
    g = CaseGrounder(RECORD, CONVERSATION)
    assert g.ground("口渴") is g.ground("口渴")
    assert g.ground("口渴") == ground("口渴", RECORD, CONVERSATION)


def test_ground_all_folds_each_case_once_and_searches_each_distinct_quote_once(rubric: Rubric,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost of grounding a run is linear: one grounder per case, one search per distinct quote of
    a case however many judges and runs repeat it (counted, not timed)."""
    made, searched = [], []
    real_init, real_ground = CaseGrounder.__init__, CaseGrounder._ground

    def init(self: CaseGrounder, record: str, conversation: str, sections: Sections | None = None,
             folded: tuple[str, str] | None = None) -> None:
        made.append(record)
        real_init(self, record, conversation, sections, folded)

    def search(self: CaseGrounder, evidence: str) -> Grounding:
        searched.append(evidence)
        return real_ground(self, evidence)

    monkeypatch.setattr(CaseGrounder, "__init__", init)
    monkeypatch.setattr(CaseGrounder, "_ground", search)
    cases = [Case(id=f"c{i}", record=RECORD, conversation=CONVERSATION) for i in range(3)]
    quotes = ["口渴", "青霉素皮试阳性", "口渴"]
    records = [CallRecord(status="ok", request_hash=f"{c.id}{j}{r}", case_id=c.id, dimension="accuracy", judge=j,
                          run=r, judgment=Judgment(dimension="accuracy", deductions=[
                              Deduction(category="numbers", type="value_error", points=2, evidence=q) for q in quotes]))
               for c in cases for j in "abcd" for r in range(2)]
    out = ground_all(rubric, cases, as_stored(records))
    assert len(out) == 3 * 4 * 2 * 3
    assert len(made) == 3 and len(searched) == 3 * 2


def test_rules_judge_quotes_on_the_examples_are_all_exact(rubric: Rubric) -> None:
    from consensus_eval.domain.config import RulesJudgeConfig
    from consensus_eval.judges.rules import RulesJudge

    judge = RulesJudge(RulesJudgeConfig(name="rules"), rubric)
    cases = load_cases(EXAMPLES).cases
    kinds: dict[str, int] = {}
    for case in cases:
        grounder = CaseGrounder(case.record, case.conversation_as_text(rubric.roles))
        for dim in rubric.dimensions:
            out = asyncio.run(judge.judge(case, dim, []))
            assert out.judgment is not None
            for q in [d.evidence for d in out.judgment.deductions] + [p.evidence for p in out.judgment.fixed_penalties]:
                k = grounder.ground(q).kind
                kinds[k] = kinds.get(k, 0) + 1
    assert set(kinds) == {"exact"} and kinds["exact"] >= 40


# --------------------------------------------------------------------------- read_run: grounding and drop


def _store(tmp_path: Path, rubric: Rubric, mode: str, judgments: list[Judgment]) -> Path:
    """A store written by hand: one case, one LLM judge, one call per judgment (accuracy, runs 0..)."""
    case = Case(id="c1", record=RECORD, conversation=CONVERSATION)
    config = EvalConfig.model_validate({"ungrounded": mode, "runs": len(judgments), "judges": [
        {"name": "j", "model": "openai/fake", "api_base": "http://x.test/v1"}]})
    records = [CallRecord(status="ok", judgment=j, raw=j.model_dump_json(), request_hash=f"h{i}", case_id="c1",
                          dimension="accuracy", judge="j", run=i) for i, j in enumerate(judgments)]
    return write_store(tmp_path / mode, rubric, config, [case], records)


JUDGMENT = Judgment(dimension="accuracy", deductions=[
    Deduction(category="numbers", type="value_error", points=2, evidence="空腹血糖7.9mmol/L"),
    Deduction(category="drugs", type="dose_error", points=2, evidence="青霉素皮试阳性"),      # invented
], fixed_penalties=[PenaltyHit(id="diabetes_in_past_history", evidence="既往史：2型糖尿病10年")],  # invented
    claimed_score=26, claimed_stars=3)


def test_read_run_grounds_every_deduction_by_id(tmp_path: Path, rubric: Rubric) -> None:
    with Store.open_existing(_store(tmp_path, rubric, "flag", [JUDGMENT]), read_only=True) as store:
        run = read_run(store)
    assert {k: g.kind for k, g in run.grounding.items()} == {"h0#d0": "exact", "h0#d1": "not_found",
                                                            "h0#p0": "not_found"}
    assert run.scores["h0"].score == 40 - 2 - 2 - 10 and run.judged_scores == {}
    assert run.grounding == ground_all(rubric, run.cases, run.records)


def test_drop_rederives_without_ungrounded_and_keeps_the_reply(tmp_path: Path, rubric: Rubric) -> None:
    with Store.open_existing(_store(tmp_path, rubric, "drop", [JUDGMENT]), read_only=True) as store:
        run = read_run(store)
    assert run.scores["h0"].score == 40 - 2                     # only the grounded deduction counts
    assert run.scores["h0"].claimed_score is None               # the claim was about all three
    as_judged = present(run.score_as_judged("h0"))
    assert as_judged.score == 26 and as_judged.claimed_score == 26
    (rec,) = run.records
    assert present(rec.judgment).to_judgment() == JUDGMENT          # the stored judgment untouched
    assert json.loads(present(rec.raw))["deductions"][1]["evidence"] == "青霉素皮试阳性"


def test_drop_leaves_fully_grounded_calls_alone(tmp_path: Path, rubric: Rubric) -> None:
    grounded = Judgment(dimension="accuracy", deductions=[
        Deduction(category="numbers", type="value_error", points=2, evidence="空腹血糖7.9mmol/L")], claimed_score=38)
    with Store.open_existing(_store(tmp_path, rubric, "drop", [grounded]), read_only=True) as store:
        run = read_run(store)
    assert run.scores["h0"].score == 38 and run.scores["h0"].claimed_score == 38 and run.judged_scores == {}


def test_judgments_jsonl_carries_grounding_and_drop(tmp_path: Path, rubric: Rubric) -> None:
    from consensus_eval.output.files import judgment_row

    with Store.open_existing(_store(tmp_path, rubric, "drop", [JUDGMENT]), read_only=True) as store:
        run = read_run(store)
    row = judgment_row(rubric, run.records[0], run.scores["h0"], run.grounding, drop=True)
    first, second = row["deductions"]
    assert first["grounding"]["kind"] == "exact" and "dropped" not in first
    span = first["grounding"]["spans"][0]
    assert RECORD[span["start"]:span["end"]] == "空腹血糖7.9mmol/L" and span["section"] == "现病史"
    assert second["grounding"] == {"kind": "not_found", "score": None, "spans": []} and second["dropped"] is True
    assert row["fixed_penalties"][0]["dropped"] is True and row["score"] == 38


def test_audit_deductions_carry_their_grounding(tmp_path: Path, rubric: Rubric) -> None:
    from consensus_eval.analysis.audit import deductions_of

    with Store.open_existing(_store(tmp_path, rubric, "flag", [JUDGMENT]), read_only=True) as store:
        run = read_run(store)
    items = deductions_of(rubric, run.records[0], run.grounding)
    assert [(d.id, d.grounding.kind if d.grounding else None) for d in items] == [
        ("h0#d0", "exact"), ("h0#d1", "not_found"), ("h0#p0", "not_found")]
    assert all(d.grounding is None for d in deductions_of(rubric, run.records[0]))


# --------------------------------------------------------------------------- reask


URL = "http://judge-a.test/v1/chat/completions"


def _reply(evidence: list[str], score: float = 36) -> dict[str, Any]:
    return {"deductions": [{"category": "numbers", "type": "value_error", "points": 2, "evidence": e, "reason": "r"}
                           for e in evidence], "fixed_penalties": [], "score": score, "stars": 3, "comment": "c"}


def _reask_call(rubric: Rubric, replies: list[dict[str, Any] | str],
                **kw: object) -> tuple[CallOutcome, respx.Route, LLMJudge]:
    cfg = EvalConfig.model_validate({"ungrounded": "reask", "judges": [
        {"name": "j", "model": "openai/fake", "api_base": "http://judge-a.test/v1", "api_key_env": "JUDGE_A_KEY",
         "mode": "json", "input_cost_per_token": 1e-6, "output_cost_per_token": 0, **kw}]})
    judge_cfg = cfg.judges[0]
    assert isinstance(judge_cfg, LLMJudgeConfig) and judge_cfg.reask_ungrounded
    judge = LLMJudge(judge_cfg, rubric)
    case = Case(id="c1", record=RECORD, conversation=CONVERSATION)
    dim = rubric.dimension("accuracy")
    it = iter(replies)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL).mock(
            side_effect=lambda r: httpx.Response(200, json=chat_response(json.loads(r.content), next(it))))
        out = asyncio.run(judge.judge(case, dim, render(rubric, dim, case)))
    return out, route, judge


def test_reask_asks_once_for_exact_quotes_and_keeps_the_second_reply(rubric: Rubric, api_keys: str) -> None:
    first = _reply(["空腹血糖7.9mmol/L", "青霉素皮试阳性"], score=36)
    second = _reply(["空腹血糖7.9mmol/L"], score=38)
    out, route, judge = _reask_call(rubric, [first, second])
    assert out.status == "ok" and route.call_count == 2 and out.attempts == 2
    assert out.judgment is not None and out.raw is not None
    assert [d.evidence for d in out.judgment.deductions] == ["空腹血糖7.9mmol/L"] and out.judgment.claimed_score == 38
    assert out.prompt_tokens == 2000 and out.completion_tokens == 400 and out.cost == pytest.approx(2000e-6)
    asked = json.loads(route.calls[1].request.content)["messages"]
    assert asked[:2] == json.loads(route.calls[0].request.content)["messages"]  # the same conversation
    assert asked[2]["role"] == "assistant" and "青霉素皮试阳性" in asked[2]["content"]
    assert asked[3] == {"role": "user", "content": reask_prompt(["青霉素皮试阳性"])}
    assert json.loads(out.raw)["score"] == 38
    assert "+reask" in judge.version  # other requests than without reask: other request hashes


def test_reask_is_not_sent_when_every_quote_is_found(rubric: Rubric, api_keys: str) -> None:
    out, route, _ = _reask_call(rubric, [_reply(["空腹血糖7.9mmol/L", "口渴"])])
    assert out.status == "ok" and route.call_count == 1 and out.attempts == 1


def test_reask_keeps_the_first_reply_when_the_second_is_invalid(rubric: Rubric, api_keys: str) -> None:
    first = _reply(["青霉素皮试阳性"], score=38)
    out, route, _ = _reask_call(rubric, [first, '{"deductions": [', '{"no'], max_reasks=1)
    assert out.status == "ok" and route.call_count == 3 and out.attempts == 3
    assert out.judgment is not None and out.raw is not None
    assert [d.evidence for d in out.judgment.deductions] == ["青霉素皮试阳性"]
    assert json.loads(out.raw)["score"] == 38  # the raw reply stored is the one kept


# --------------------------------------------------------------------------- the fake server's quotes


def test_fake_server_panel_invented_quotes_come_out_not_found(tmp_path: Path, rubric: Rubric) -> None:
    from consensus_eval import api
    from tests.fake_server import FakeConfig, FakeServer

    with FakeServer(FakeConfig(seed=1, max_lifetime_s=600, p_invented_quote=0.2)) as srv:
        cfg = {"judges": [{"name": n, "model": f"openai/{n}", "api_base": srv.url + "/v1", "mode": m,
                           "input_cost_per_token": 1e-7, "output_cost_per_token": 2e-7}
                          for n, m in (("judge-a", "tools"), ("judge-b", "json"), ("judge-c", "md_json"))]}
        prep = api.prepare(str(EXAMPLES), cfg)
        with Store(tmp_path / "results.sqlite") as store:   # what `score` stores (no report needed here)
            store.set_meta("rubric", prep.rubric.model_dump(mode="json"))
            store.set_meta("config", prep.config.to_json())
            store.set_cases(c.model_dump(mode="json") for c in prep.cases)
            store.set_plan(c.planned for c in prep.calls)
            asyncio.run(execute(prep.calls, prep.judges, prep.rubric, store, None))
            run = read_run(store)
    invented: dict[str, int] = {}
    real: dict[str, int] = {}
    missed: list[str] = []
    for r in run.records:
        assert r.judgment is not None, r.error
        for i, d in enumerate(r.judgment.deductions):
            kind = run.grounding[f"{r.request_hash}#d{i}"].kind
            bucket = invented if d.reason.endswith(INVENTED_MARK) else real
            bucket[kind] = bucket.get(kind, 0) + 1
            if kind == "not_found" and bucket is real:
                missed.append(d.evidence)
    assert set(invented) == {"not_found"} and invented["not_found"] >= 10
    assert "not_found" not in real and "empty" not in real, missed
    assert {"exact", "normalised", "fuzzy"} <= set(real)


def test_invented_quotes_are_in_no_example() -> None:
    for case in load_cases(EXAMPLES).cases:
        for q in INVENTED_QUOTES:
            assert ground(q, case.record, case.conversation_as_text({"doctor": "医生", "patient": "患者"})).kind \
                == "not_found"


def test_a_quote_repeated_all_over_a_case_keeps_max_spans_and_counts_the_rest() -> None:
    """A sentence repeated 2,000 times, quoted by every deduction: each grounding keeps MAX_SPANS spans and
    counts the rest, so a run's outputs grow linearly, not as n x n (once 289 MB of judgments.jsonl)."""
    from consensus_eval.domain.grounding import MAX_SPANS

    sentence = "患者自述口干多饮。"
    g = ground(sentence, sentence * 2000, "")
    assert g.kind == "exact" and len(g.spans) == MAX_SPANS and g.more_spans == 2000 - MAX_SPANS
    assert [s.start for s in g.spans] == [i * len(sentence) for i in range(MAX_SPANS)]
    few = ground(sentence, sentence * 3, "")
    assert len(few.spans) == 3 and few.more_spans == 0


def test_texts_folded_together_are_folded_as_one_by_one() -> None:
    """normalise_all (a rebuild's texts folded on arrays of code points) gives normalise's strings, and the map back
    from normalised to original positions is the one str.translate's fold gives, on texts mixing every kind of fold:
    dropped (blanks, quote marks), one for one (full width, punctuation), one for several (``…`` -> ``...``, ``℃``,
    ``㎎``), characters outside the basic plane and a lone surrogate (folded one by one instead)."""
    rng = random.Random(7)
    pieces = list("患者男性，45岁。主诉：头痛3天……体温38.5℃，血压152/90mmHg；（无）“引号”ＡＢ１ \n\t\u3000～-—㎎½ﷺ")
    pieces += ["\U0001F600", "\ud800", "abc"]
    for _ in range(300):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.choice([0, 1, 7, 300])))
                 for _ in range(rng.randrange(6))]
        assert grounding_module.normalise_all(texts) == [normalise(t) for t in texts]
        for text, folded in zip(texts, grounding_module.normalise_all(texts), strict=True):
            sizes = [len(normalise(c)) for c in text]
            origin = [i for i, k in enumerate(sizes) if k for _ in range(k)]   # the original of each folded character
            got = grounding_module.Normalised(text, folded)
            for a in range(len(folded)):
                b = rng.randrange(a + 1, len(folded) + 1)
                assert got.span(a, b) == (origin[a], origin[b - 1] + 1)

