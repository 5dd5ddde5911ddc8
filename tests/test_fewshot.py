"""Few-shot examples from clinicians' corrections (docs/rubrics.md): never from the held-out part (by construction,
and over many random spot checks and corrections), part of every LLM request's hash (changing them re-asks the
judges, a resumed run asks nothing again), absent by default (the prompts and hashes of a config without them are
those of before), and what they are for: the judge that misses a type finds it once an example shows it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from consensus_eval import api
from consensus_eval.analysis.corrections import corrections
from consensus_eval.analysis.spotcheck import draw, tuning_ids
from consensus_eval.domain.cases import Case, load_cases
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.fewshot import Correction, excerpt, few_shot_examples
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.execution.labels import HumanLabelRecord
from consensus_eval.execution.store import Store
from tests.fake_server import FakeConfig, FakeServer

ROOT = Path(__file__).resolve().parents[1]
TYPES = {"accuracy": ["value_error", "dose_error", "drug_missing"],
         "completeness": ["fh_absent", "cc_duration_missing"], "standardization": ["colloquial", "time_vague"]}


def test_no_example_ever_comes_from_the_held_out_part_over_random_spot_checks() -> None:
    """Property test over 300 random runs: a spot check drawn and split by the real code, corrections on cases of
    both parts (each with text of its own), any per-dimension limit: every example is a tuning case's, every text
    it shows is a tuning correction's; corrections on held-out cases alone give no example."""
    rubric = load_rubric("medical_record")
    for trial in range(300):
        rng = random.Random(trial)
        cases = [Case(id=f"c{i}", conversation="医生：好。", record=f"主诉：记录{i}。\n现病史：数值{i}。")
                 for i in range(rng.randint(2, 40))]
        sample = draw(cases, [], rng.randint(1, len(cases)), seed=rng.randint(0, 10_000))
        tuning = tuning_ids(sample)
        assert tuning <= {c.id for c in cases} and len(tuning) == round(len(sample) / 2)
        held_out = {r.case_id for r in sample} - tuning
        found: list[Correction] = []
        for _ in range(rng.randint(0, 60)):
            c = rng.choice(cases)
            dim = rng.choice(list(TYPES))
            found.append(Correction(case_id=c.id, dimension=dim, kind=rng.choice(["missed", "false_alarm"]),
                                    type=rng.choice(TYPES[dim]), evidence=f"数值{c.id[1:]}" if rng.random() < 0.7
                                    else f"证据-{c.id}-{rng.random()}", points=rng.choice([1.0, 2.0, 3.0]),
                                    judge=rng.choice([None, "a", "b"]), reason=f"理由-{c.id}",
                                    comment=f"意见-{c.id}"))
        records = {c.id: c.record for c in cases}
        examples = few_shot_examples(tuning, found, records, per_dimension=rng.randint(1, 6),
                                     dimensions=None if rng.random() < 0.5 else [rng.choice(list(TYPES))])
        shown = [e for exs in examples.values() for e in exs]
        assert all(e.case_id in tuning for e in shown), trial
        for e in shown:
            assert f"-{e.case_id}" in (e.comment or "") and e.case_id not in held_out
            source = [c for c in found if c.case_id == e.case_id and c.evidence == e.evidence]
            assert source and e.excerpt in ("", excerpt(records[e.case_id], e.evidence))
        text = json.dumps([e.model_dump() for e in shown], ensure_ascii=False)
        assert not any(f"-{cid}-" in text or f"-{cid}\"" in text for cid in held_out), trial
        assert few_shot_examples(held_out, [], records) == {}
        assert few_shot_examples(tuning, [c for c in found if c.case_id in held_out], records) == {}
    assert rubric.id == "medical_record"


def test_examples_are_chosen_by_weight_one_type_before_any_twice() -> None:
    record = "主诉：口干3月。\n现病史：空腹血糖7.9mmol/L，二甲双胍0.5g bid。"
    found = [Correction("t", "accuracy", "missed", "value_error", "7.9mmol/L", 2.0, comment="对话是8.9"),
             Correction("t", "accuracy", "missed", "value_error", "口干3月", 2.0),
             Correction("t", "accuracy", "false_alarm", "dose_error", "0.5g", 1.0, judge="a", reason="剂量"),
             Correction("t", "accuracy", "false_alarm", "dose_error", "0.5g", 1.0, judge="b", reason="剂量"),
             Correction("t", "accuracy", "missed", "drug_missing", "格列美脲", 3.0)]
    got = few_shot_examples({"t"}, found, {"t": record}, per_dimension=3)["accuracy"]
    # drug_missing (3 points) first, then one value_error and one dose_error (the same mistake of two judges once)
    assert [(e.type, e.evidence) for e in got] == [("drug_missing", "格列美脲"), ("value_error", "7.9mmol/L"),
                                                   ("dose_error", "0.5g")]
    assert got[0].excerpt == "" and got[1].excerpt == "现病史：空腹血糖7.9mmol/L，二甲双胍0.5g bid。"
    assert excerpt("a" * 100 + "X" + "b" * 100, "X", 10) == "…" + "a" * 10 + "X" + "b" * 10 + "…"
    assert excerpt(record, "７.９ｍｍｏｌ/Ｌ") == got[1].excerpt  # full-width quotes are found too


def _config(url: str, few_shot: dict[str, Any] | None = None, prompts_dir: Path | None = None) -> EvalConfig:
    return EvalConfig.model_validate({
        "rubric": "medical_record", "runs": 1, "important_runs": 1,
        **({"few_shot": few_shot} if few_shot else {}),
        **({"prompts_dir": str(prompts_dir)} if prompts_dir else {}),
        "judges": [{"name": "rules", "kind": "rules"},
                   {"name": "blind", "model": "openai/fake-blind", "api_base": url + "/v1", "mode": "json",
                    "max_retries": 0, "max_reasks": 0}]})


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rules run of the bundled examples with a spot check of 8 cases, split, and corrections on cases of both
    parts, each carrying its case id in its text (the rules judge's deductions disagreed with, deductions added)."""
    out = tmp_path_factory.mktemp("fewshot") / "run"
    api.run(api.prepare(ROOT / "examples" / "cases.jsonl", "configs/default.yaml"), out)
    sample = api.spot_check(out, 8, seed=3).sample
    results = api.load_run(out, replies=False)
    with Store(out / "results.sqlite") as store:
        for r in sample:
            store.upsert_human_label(HumanLabelRecord(
                case_id=r.case_id, dimension="accuracy", deduction_id=f"added-{r.case_id}", reviewer="li",
                kind="added_deduction", value="value_error", points=2, evidence=f"证据{r.case_id}",
                comment=f"临床意见{r.case_id}", source="test"))
            for rec in results.records:
                if rec.case_id == r.case_id and rec.judgment is not None and rec.judgment.deductions:
                    store.upsert_human_label(HumanLabelRecord(
                        case_id=r.case_id, dimension=rec.dimension, deduction_id=f"{rec.request_hash}#d0",
                        reviewer="li", kind="verdict", value="disagree", comment=f"不应扣{r.case_id}", source="test"))
                    break
    return out


def test_the_examples_of_a_run_come_from_its_tuning_part_only(labelled: Path) -> None:
    results = api.load_run(labelled, replies=False)
    tuning = tuning_ids(results.spot_checks)
    held = {r.case_id for r in results.spot_checks} - tuning
    assert len(tuning) == len(held) == 4
    found = corrections(results)
    assert {c.case_id for c in found} == tuning | held  # the run holds corrections on both parts
    assert {c.kind for c in found} == {"missed", "false_alarm"}
    false_alarm = next(c for c in found if c.kind == "false_alarm")
    assert false_alarm.judge == "rules" and false_alarm.reason and false_alarm.comment == f"不应扣{false_alarm.case_id}"
    cfg = _config("http://127.0.0.1:9", {"from": str(labelled), "per_dimension": 20})
    prep = api.prepare(ROOT / "examples" / "cases.jsonl", cfg, check_keys=False)
    assert prep.config.few_shot is not None
    shown = [e for exs in prep.config.few_shot.examples.values() for e in exs]
    assert shown and {e.case_id for e in shown} <= tuning
    assert {e.case_id for e in shown if e.kind == "missed"} == tuning
    prompts = json.dumps([c.messages for c in prep.calls], ensure_ascii=False)
    for cid in tuning:
        assert f"临床意见{cid}" in prompts
    for cid in held:
        assert f"临床意见{cid}" not in prompts and f"证据{cid}" not in prompts and f"不应扣{cid}" not in prompts


def test_examples_enter_every_llm_request_hash_and_nothing_else_changes(labelled: Path, tmp_path: Path) -> None:
    cases = load_cases(ROOT / "examples" / "cases.jsonl").cases[:4]
    plain = api.prepare(cases, _config("http://127.0.0.1:9"), check_keys=False)
    shots = api.prepare(cases, _config("http://127.0.0.1:9", {"from": str(labelled)}), check_keys=False)
    fewer = api.prepare(cases, _config("http://127.0.0.1:9", {"from": str(labelled), "per_dimension": 1}),
                        check_keys=False)
    only_acc = api.prepare(cases, _config("http://127.0.0.1:9", {"from": str(labelled), "dimensions": ["accuracy"]}),
                           check_keys=False)

    def hashes(p: api.Prepared, judge: str, dim: str | None = None) -> list[str]:
        return [c.planned.request_hash for c in p.calls if c.planned.judge == judge
                and (dim is None or c.planned.dimension == dim)]

    assert hashes(plain, "rules") == hashes(shots, "rules")         # the rules judge reads the case, not a prompt
    assert shots.config.few_shot is not None and fewer.config.few_shot is not None
    shown, one = shots.config.few_shot.examples, fewer.config.few_shot.examples
    assert "accuracy" in shown and len(shown["accuracy"]) == 3 and len(one["accuracy"]) == 1
    for dim in ("accuracy", "completeness", "standardization"):
        a, b, c = hashes(plain, "blind", dim), hashes(shots, "blind", dim), hashes(fewer, "blind", dim)
        if dim in shown:   # other examples, other requests; the same examples, the same requests
            assert not set(a) & set(b), dim
            assert (b == c) if shown[dim] == one[dim] else not set(b) & set(c), dim
        else:              # a dimension without a correction asks what it asked
            assert a == b == c, dim
    assert hashes(only_acc, "blind", "accuracy") == hashes(shots, "blind", "accuracy")
    assert hashes(only_acc, "blind", "completeness") == hashes(plain, "blind", "completeness")
    assert hashes(only_acc, "blind", "standardization") == hashes(plain, "blind", "standardization")
    # the stored config holds the examples the run used; without few_shot it is as it was (no key at all)
    assert "few_shot" not in plain.config.to_json()
    stored = EvalConfig.model_validate(shots.config.to_json())
    assert stored.few_shot is not None and stored.few_shot.examples == shots.config.few_shot.examples


def test_a_config_without_few_shot_renders_the_prompts_of_before() -> None:
    """The shipped templates write nothing for no example: the prompt (and so every request hash of every run made
    before few-shot examples existed) is byte for byte the same as with the examples block taken out."""
    from consensus_eval.domain.prompts import render, render_case

    rubric = load_rubric("medical_record")
    case = load_cases(ROOT / "examples" / "cases.jsonl").cases[0]
    for dim in rubric.dimensions:
        text = render(rubric, dim, case)[0]["content"]
        assert "临床医生纠正过" not in text and "EXAMPLE" not in text and "\n\n\n" not in text
    assert "临床医生纠正过" not in render_case(rubric, case)[0]["content"]


@pytest.mark.parametrize("call", ["per_dimension", "per_case"])
def test_the_judge_that_misses_a_type_finds_it_once_an_example_shows_it(tmp_path: Path, call: str) -> None:
    """The loop's point, through the LLM judge and the fake server's prompt-sensitive judge (misses value_error
    unless the prompt names it or shows an example of it): with a few-shot example of value_error from the tuning
    part, it deducts value_error; without, it does not. A second run of the same config asks nothing again."""
    cases = load_cases(ROOT / "examples" / "cases.jsonl").cases[:2]
    source = tmp_path / "source"
    api.run(api.prepare(cases, "configs/default.yaml"), source)
    sample = api.spot_check(source, 2, seed=1).sample
    tuning = next(r.case_id for r in sample if r.part == "tuning")
    with Store(source / "results.sqlite") as store:
        store.upsert_human_label(HumanLabelRecord(
            case_id=tuning, dimension="accuracy", deduction_id="x1", reviewer="li", kind="added_deduction",
            value="value_error", points=2, evidence="7.9", comment="对话中为8.9", source="test"))
    script = {"deductions": [{"category": "numbers", "type": "value_error", "points": 2, "evidence": "血糖",
                              "reason": "r"}], "fixed_penalties": [], "score": 38, "stars": 5, "comment": "c"}
    empty = {"deductions": [], "fixed_penalties": [], "score": 35, "stars": 5, "comment": "c"}
    replies = {f"fake-blind|{c.id}": {"accuracy": script, "completeness": empty,
                                      "standardization": {**empty, "score": 25}} for c in cases}
    fake = FakeConfig(seed=1, replies=replies, misses={"fake-blind": ["value_error"]}, fault_free_after=1)

    def types(out: Path) -> set[str]:
        res = api.load_run(out, replies=False)
        return {d.type for r in res.records if r.judge == "blind" and r.judgment is not None
                for d in getattr(r.judgment, "deductions", [])}

    with FakeServer(fake) as srv:
        def cfg(shots: dict[str, Any] | None) -> EvalConfig:
            c = _config(srv.url, shots)
            return c.model_copy(update={"judges": [c.judges[1].model_copy(update={"call": call})]})

        api.run(api.prepare(cases, cfg(None), check_keys=False), tmp_path / "v1")
        api.run(api.prepare(cases, cfg({"from": str(source)}), check_keys=False), tmp_path / "v2")
        sent = len(srv.log)
        again = api.run(api.prepare(cases, cfg({"from": str(source)}), check_keys=False), tmp_path / "v2")
        assert len(srv.log) == sent and again.progress is not None and again.progress.skipped == again.progress.total
    assert types(tmp_path / "v1") == set()
    assert types(tmp_path / "v2") == {"value_error"}
