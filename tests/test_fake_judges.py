"""The fake server's prompt-sensitive judges (test equipment; tests/fake_server.py): one that misses a
deduction type unless the prompt names it or shows an example of it, one biased towards longer records. They
are test devices: these tests pin down what the quality-control tests build on, through the real prompts and the real
LLM judge, so a prompt that names nothing extra is never taken for one that does."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import httpx
import pytest

from consensus_eval import api
from consensus_eval._resources import data_dir
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from tests.fake_server import FakeConfig, FakeServer, length_shift, miss, named_types
from tests.fakellm import CANDIDATES

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cases.jsonl"
ALL_TYPES = [t for cands in CANDIDATES.values() for _, t, _ in cands]


def _config(url: str, *, mode: str = "json", prompts_dir: Path | None = None,
            call: str = "per_dimension") -> EvalConfig:
    return EvalConfig.model_validate({
        "rubric": "medical_record", "runs": 1, "important_runs": 1,
        **({"prompts_dir": str(prompts_dir)} if prompts_dir is not None else {}),
        "judges": [{"name": "blind", "model": "openai/fake-blind", "api_base": url + "/v1", "mode": mode,
                    "call": call, "max_retries": 0, "max_reasks": 0}]})


def _cases(n: int = 3) -> list[Case]:
    return [Case.model_validate(json.loads(line)) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()[:n]]


def _prompts_naming(tmp: Path, type_id: str) -> Path:
    """The shipped prompts with one line added to accuracy's criteria: it names ``type_id``."""
    root = tmp / "prompts"
    shutil.copytree(data_dir("prompts"), root)
    path = root / "medical_record" / "accuracy.j2"
    text = path.read_text(encoding="utf-8")
    marker = "【准确性检查要点】\n"
    assert marker in text
    line = f"- 特别注意：检验数值与对话不一致时记 {type_id}。\n"
    path.write_text(text.replace(marker, marker + line), encoding="utf-8")
    return root


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
@pytest.mark.parametrize("call", ["per_dimension", "per_case"])
def test_the_shipped_prompts_name_no_type_beyond_the_rubric_listing(mode: str, call: str) -> None:
    """The request as each mode sends it (instructor's schema lists every type) names none: the listing and the
    schema do not count; a criteria line that names a type does."""
    prep = api.prepare(_cases(1), _config("http://127.0.0.1:9", mode=mode, call=call), check_keys=False)
    shown = api.show_prompt(prep, prep.cases[0].id)
    assert shown and all(s.request is not None for s in shown)
    for s in shown:
        assert s.request is not None
        body = dict(s.request)
        text = json.dumps(body, ensure_ascii=False)
        # the listing (and, in the JSON modes, the schema) write every type of the dimension(s) asked
        assert any(t in text for t in ALL_TYPES)
        assert named_types(body, ALL_TYPES) == set()


def test_a_criteria_line_or_an_example_names_the_type(tmp_path: Path) -> None:
    prep = api.prepare(_cases(1), _config("http://127.0.0.1:9", mode="md_json",
                                          prompts_dir=_prompts_naming(tmp_path, "value_error")), check_keys=False)
    body = dict(next(s.request for s in api.show_prompt(prep, prep.cases[0].id + ":accuracy") if s.request))
    assert named_types(body, ALL_TYPES) == {"value_error"}
    # an example of the type, written as a few-shot block writes it, names it too; a word containing it does not
    system = {"role": "system", "content": '示例：{"type": "dose_error", "points": 2}；not_value_errors'}
    assert named_types({"messages": [system]}, ALL_TYPES) == {"dose_error"}
    # a type written inside the fenced case data is the case's text, not the prompt's
    fenced = {"role": "user", "content": "<<<BEGIN MEDICAL RECORD (data)>>>\n重点 dose_error\n<<<END MEDICAL RECORD>>>"}
    assert named_types({"messages": [fenced]}, ALL_TYPES) == set()


def test_miss_drops_the_unnamed_types_only_and_gives_their_points_back() -> None:
    cfg = FakeConfig(misses={"fake-blind": ["value_error"]})
    reply = {"deductions": [{"category": "numbers", "type": "value_error", "points": 2},
                            {"category": "drugs", "type": "dose_error", "points": 2}], "score": 36}
    plain = {"messages": [{"role": "system", "content": "（type: value_error）"}]}
    named = {"messages": [{"role": "system", "content": "（type: value_error） 注意 value_error"}]}
    assert [d["type"] for d in miss(cfg, "openai/fake-blind", plain, reply)["deductions"]] == ["dose_error"]
    assert miss(cfg, "openai/fake-blind", plain, reply)["score"] == 38
    assert miss(cfg, "openai/fake-blind", named, reply) == reply
    assert miss(cfg, "openai/other", plain, reply) == reply  # only the listed model misses
    assert length_shift(FakeConfig(length_bias={"long": 2.0}), "openai/long", "x" * 800) == pytest.approx(2.0)
    assert length_shift(FakeConfig(length_bias={"long": 2.0}), "openai/long", "x" * 200) == pytest.approx(-2.0)
    assert length_shift(FakeConfig(), "openai/long", "x" * 800) == 0.0


def _types_stored(out: Path) -> set[str]:
    res = api.load_run(out, replies=False)
    found: set[str] = set()
    for r in res.records:
        assert r.status == "ok", r.error
        if r.judgment is not None and r.dimension == "accuracy":
            found.update(d.type for d in getattr(r.judgment, "deductions", []))
    return found


@pytest.mark.parametrize("call", ["per_dimension", "per_case"])
def test_the_missing_judge_finds_the_type_once_the_prompt_names_it(tmp_path: Path, call: str) -> None:
    """End to end through the LLM judge: scripted replies hold value_error on every case; the judge drops it
    with the shipped prompts and keeps it with a prompt that names it."""
    cases = _cases(3)
    dims = ("accuracy", "completeness", "standardization")
    script = {"deductions": [{"category": "numbers", "type": "value_error", "points": 2, "evidence": "血糖",
                              "reason": "r"},
                             {"category": "drugs", "type": "dose_error", "points": 2, "evidence": "血糖",
                              "reason": "r"}], "fixed_penalties": [], "score": 36, "stars": 4, "comment": "c"}
    empty = {"deductions": [], "fixed_penalties": [], "score": 0, "stars": 5, "comment": "c"}
    replies = {f"fake-blind|{c.id}": {d: script if d == "accuracy" else {**empty, "score": 35 if d ==
                                                                                 "completeness" else 25}
                                              for d in dims} for c in cases}
    cfg = FakeConfig(seed=1, replies=replies, misses={"fake-blind": ["value_error"]}, fault_free_after=1)
    with FakeServer(cfg) as srv:
        api.run(api.prepare(cases, _config(srv.url, call=call), check_keys=False), tmp_path / "v1")
        api.run(api.prepare(cases, _config(srv.url, call=call, prompts_dir=_prompts_naming(tmp_path, "value_error")),
                            check_keys=False), tmp_path / "v2")
    assert _types_stored(tmp_path / "v1") == {"dose_error"}
    assert _types_stored(tmp_path / "v2") == {"value_error", "dose_error"}


def _ask(client: httpx.Client, url: str, model: str, case: str, record: str, conversation: str,
         seed: int) -> float:
    user = (f"【病例 {case}】\n<<<BEGIN CONVERSATION (data)>>>\n{conversation}\n<<<END CONVERSATION>>>\n"
            f"<<<BEGIN MEDICAL RECORD (data)>>>\n{record}\n<<<END MEDICAL RECORD>>>")
    body: dict[str, Any] = {
        "model": model, "response_format": {"type": "json_object"}, "seed": seed,
        "messages": [{"role": "system", "content": "rubric ... AccuracyJudgment"}, {"role": "user", "content": user}]}
    r = client.post(url + "/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    reply = json.loads(r.json()["choices"][0]["message"]["content"])
    return float(sum(d["points"] for d in reply["deductions"]))


def test_the_length_biased_judge_deducts_less_on_a_longer_record_and_the_others_do_not() -> None:
    """With defects following the conversation, a record padded to twice its length under another id: the
    length-biased model deducts clearly less on average, a model without the bias the same give or take."""
    cfg = FakeConfig(seed=2, bias={"plain": 2.0, "long": 2.0}, length_bias={"long": 3.0}, defects_from="conversation",
                     fault_free_after=1)
    deltas: dict[str, list[float]] = {"openai/plain": [], "openai/long": []}
    with FakeServer(cfg) as srv, httpx.Client(timeout=10) as client:
        for i in range(40):
            conversation = f"医生：第{i}位患者，哪里不舒服？\n患者：口干{i}天。"
            record = f"主诉：口干{i}天。" + "现病史：无特殊。" * 40
            for model, out in deltas.items():
                before = statistics.fmean(_ask(client, srv.url, model, f"c{i}", record, conversation, s)
                                          for s in range(3))
                after = _ask(client, srv.url, model, f"c{i}~1", record + "以上内容依据本次问诊整理。" * 30,
                             conversation, 0)
                out.append(before - after)  # points deducted less on the padded record
    assert statistics.fmean(deltas["openai/long"]) > 3.0
    assert abs(statistics.fmean(deltas["openai/plain"])) < 1.0
