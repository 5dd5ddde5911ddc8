"""`score --dry-run --show-prompt CASE[:DIMENSION]` prints what each judge would send, response
schema included, and that is exactly what a provider receives for that call (respx captures the bodies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from typer.testing import CliRunner

from consensus_eval import api
from consensus_eval._errors import InputError
from consensus_eval.cli import app
from consensus_eval.domain.config import EvalConfig
from tests.conftest import ROOT
from tests.fakellm import case_of, chat_response, dimension_of, make_reply

URL = "http://judge.test/v1/chat/completions"
CASES = ROOT / "examples" / "cases.jsonl"
PARTS = ("messages", "tools", "tool_choice", "response_format")


def _config(mode: str, call: str = "per_dimension") -> EvalConfig:
    return EvalConfig.model_validate({"judges": [
        {"name": "j", "model": "openai/gpt-4.1", "api_base": "http://judge.test/v1", "api_key_env": "JUDGE_KEY",
         "mode": mode, "call": call},
        {"name": "rules", "kind": "rules"}]})


def _sent(prep: api.Prepared, out: Path) -> list[dict[str, Any]]:
    import random

    bodies: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        blob = json.dumps(body, ensure_ascii=False)
        if "CaseJudgment" in blob:        # a whole-case request: every dimension's reply
            reply = {d: make_reply(d, random.Random(len(bodies)), n=0) for d in ("accuracy", "completeness",
                                                                                  "standardization")}
        else:
            reply = make_reply(dimension_of(body), random.Random(len(bodies)), n=1)
        return httpx.Response(200, json=chat_response(body, reply))

    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=answer)
        api.run(prep, out, n_boot=0)
    return bodies


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_the_prompt_shown_is_the_request_the_provider_receives(mode: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-test-show-prompt-0123456789")
    prep = api.prepare(CASES, _config(mode))
    shown = api.show_prompt(prep, "case-02:completeness")
    assert [(s.judge, s.dimension) for s in shown] == [("j", "completeness"), ("rules", "completeness")]
    assert shown[1].request is None          # the rules judge reads the case itself: no prompt
    request = shown[0].request
    assert request is not None
    sent = [b for b in _sent(prep, tmp_path / "out") if case_of(b) == "case-02" and dimension_of(b) == "completeness"]
    assert len(sent) == 1
    assert {k: v for k, v in sent[0].items() if k in PARTS} == request
    # every dimension without :DIMENSION, in the plan's order
    assert [s.dimension for s in api.show_prompt(prep, "case-02") if s.judge == "j"] == [
        "accuracy", "completeness", "standardization"]


def test_a_whole_case_judge_shows_its_one_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-test-show-prompt-0123456789")
    prep = api.prepare(CASES, _config("tools", call="per_case"))
    shown = [s for s in api.show_prompt(prep, "case-05") if s.judge == "j"]
    assert [s.dimension for s in shown] == ["per_case"]
    sent = [b for b in _sent(prep, tmp_path / "out") if case_of(b) == "case-05"]
    assert len(sent) == 1 and {k: v for k, v in sent[0].items() if k in PARTS} == shown[0].request


def test_the_command_prints_each_message_exactly_and_the_schema(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rubric: pdqi9\njudges:\n  - {name: g, model: openai/gpt-4.1, api_key_env: NO_KEY_SET_37, "
                   "mode: tools}\n  - {name: s, kind: simulated}\n", encoding="utf-8")
    cases = ROOT / "examples" / "pdqi9" / "cases.jsonl"
    res = CliRunner().invoke(app, ["score", str(cases), "--config", str(cfg), "--dry-run", "--show-prompt",
                                   "pdqi9-03:thorough"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    (request,) = [s.request for s in api.show_prompt(api.prepare(cases, cfg, check_keys=False), "pdqi9-03:thorough")
                  if s.judge == "g"]
    assert request is not None
    for m in request["messages"]:
        assert f"[{m['role']}]\n{m['content']}\n" in res.output        # the text as sent, not wrapped
    assert "[tools]\n" + json.dumps(request["tools"], ensure_ascii=False, indent=2) in res.output
    assert "s, thorough" in res.output and "no prompt is sent" in res.output   # the simulated judge sends none
    # without --dry-run, or for a case the run does not have: a clear refusal, nothing sent
    res = CliRunner().invoke(app, ["score", str(cases), "--config", str(cfg), "--show-prompt", "pdqi9-03"])
    assert res.exit_code == 2 and "add --dry-run" in res.output
    with pytest.raises(InputError, match=r"no case 'nope' in the cases \(pdqi9-01, .*\); give CASE or "
                                         r"CASE:DIMENSION, the dimension one of up_to_date, accurate"):
        api.show_prompt(api.prepare(cases, cfg, check_keys=False), "nope:accurate")
