"""Evaluation config: bundled configs, judge validation, secrets never in the file, judge identity."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from consensus_eval import InputError
from consensus_eval.domain.config import EvalConfig, JudgeConfig, LLMJudgeConfig, load_config
from tests.helpers import present


def _judge_config(**fields: object) -> JudgeConfig:
    """A judge config validated from a mapping, as a config file's entry is (the class follows ``kind``)."""
    return JudgeConfig.model_validate(fields)


def _llm(judge: JudgeConfig) -> LLMJudgeConfig:
    """``judge``, asserted an LLM judge's config."""
    assert isinstance(judge, LLMJudgeConfig)
    return judge

BAD = Path(__file__).parent / "data" / "bad"
FAKE_KEY = "sk-FAKEFAKEFAKEFAKEFAKE1234"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(text, encoding="utf-8")
    return p


# --------------------------------------------------------------------------- bundled configs


def test_default_config_rules_only() -> None:
    cfg = load_config("configs/default.yaml")
    assert cfg.rubric == "medical_record"
    assert [(j.name, j.kind) for j in cfg.judges] == [("rules", "rules")]
    assert (cfg.runs, cfg.important_runs) == (1, 3)
    assert cfg.runs_for(False) == 1 and cfg.runs_for(True) == 3
    assert cfg.consensus.aggregate == "mean" and cfg.consensus.flag_spread is None
    assert cfg.consensus.flag_spread_share == 0.1      # 10 points of the medical_record rubric's 0-100
    assert all(j.missing_key() is None for j in cfg.judges)


def test_load_config_default_argument() -> None:
    assert load_config() == load_config("configs/default.yaml")


def test_panel_example() -> None:
    cfg = load_config("configs/panel.example.yaml")
    llm = [_llm(j) for j in cfg.judges if j.kind == "llm"]
    assert [j.name for j in llm] == ["deepseek", "gpt", "qwen"]
    assert [j.name for j in cfg.judges if j.kind == "rules"] == ["rules"]
    assert [j.api_key_env for j in llm] == ["DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY"]
    assert [j.mode for j in llm] == ["md_json", "tools", "json"]
    assert _llm(cfg.judge("deepseek")).model == "deepseek/deepseek-reasoner"
    assert _llm(cfg.judge("qwen")).input_cost_per_token == pytest.approx(1.6e-6)
    assert cfg.consensus.min_judges == 2
    with pytest.raises(KeyError):
        cfg.judge("claude")


def test_local_vllm_example() -> None:
    cfg = load_config("configs/local-vllm.example.yaml")
    local = _llm(cfg.judge("local-qwen"))
    assert local.kind == "llm" and local.model.startswith("hosted_vllm/")
    assert local.api_base == "http://127.0.0.1:8000/v1"
    assert local.api_key_env is None  # commented out in the file: a local server needs no key
    assert local.missing_key() is None and local.api_key() is None
    assert (local.concurrency, local.timeout_s, local.mode) == (32, 180, "json")
    assert cfg.judge("rules").kind == "rules"


def test_default_config_from_another_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert not Path("configs/default.yaml").exists()
    cfg = load_config("configs/default.yaml")
    assert [j.name for j in cfg.judges] == ["rules"]
    assert [j.name for j in load_config("configs/panel.example.yaml").judges] == ["deepseek", "gpt", "qwen", "rules"]


# --------------------------------------------------------------------------- errors


def test_unknown_judge_field_names_the_judge() -> None:
    path = BAD / "config_unknown_field.yaml"
    with pytest.raises(InputError) as ei:
        load_config(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: invalid config:")
    assert "judges[1 gpt].temprature: Extra inputs are not permitted" in msg


@pytest.mark.parametrize(("name", "line"), [
    ("config_literal_key.yaml", 7),        # `auth: "sk-FAKE..."` under extra_body
    ("config_api_key_field.yaml", 6),      # `api_key: ...`
    ("config_key_in_env_field.yaml", 5),   # `api_key_env: sk-FAKE...`
])
def test_literal_key_refused_with_file_and_line(name: str, line: int) -> None:
    path = BAD / name
    with pytest.raises(InputError) as ei:
        load_config(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}:{line}: this looks like a literal API key")
    assert "api_key_env" in msg
    # the secret itself is never echoed
    assert FAKE_KEY not in msg and "not-a-real-key" not in msg


@pytest.mark.parametrize("line", [
    f"    model: {FAKE_KEY}",
    "    extra_body: {token: AIzaSyFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAK}",
    "    api_key : something",
    "    - api_key: something",
    f"# api_key_env: {FAKE_KEY}",            # even in a comment
])
def test_literal_key_patterns(tmp_path: Path, line: str) -> None:
    # line 1 "judges:", 2 "  - name: gpt", 3 the line under test
    p = _write(tmp_path, f"judges:\n  - name: gpt\n{line}\n    model: openai/gpt-4.1\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(p))}:3: this looks like a literal API key"):
        load_config(p)


def test_api_key_env_must_be_a_variable_name() -> None:
    path = BAD / "config_env_not_a_name.yaml"
    with pytest.raises(InputError) as ei:
        load_config(path)
    msg = str(ei.value)
    assert "judges[0 gpt]: api_key_env must be the NAME of an environment variable" in msg
    assert "7f3a-secret-token" not in msg
    with pytest.raises(ValidationError, match="NAME of an environment variable"):
        _judge_config(name="x", model="openai/gpt-4.1", api_key_env=FAKE_KEY)


def test_api_key_env_name_is_accepted_and_read(monkeypatch: pytest.MonkeyPatch) -> None:
    j = _llm(_judge_config(name="gpt", model="openai/gpt-4.1", api_key_env="CE_TEST_OPENAI_KEY"))
    monkeypatch.setenv("CE_TEST_OPENAI_KEY", "dummy-value")
    assert j.api_key() == "dummy-value" and j.missing_key() is None


def test_missing_env_var_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CE_TEST_MISSING_KEY", raising=False)
    j = _llm(_judge_config(name="gpt", model="openai/gpt-4.1", api_key_env="CE_TEST_MISSING_KEY"))
    msg = j.missing_key()
    assert msg is not None
    assert "'gpt'" in msg and "CE_TEST_MISSING_KEY is not set" in msg
    assert "export CE_TEST_MISSING_KEY=" in msg
    assert j.api_key() is None
    monkeypatch.setenv("CE_TEST_MISSING_KEY", "")  # set but empty counts as missing
    assert j.missing_key() is not None


def test_panel_missing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    cfg = load_config("configs/panel.example.yaml")
    missing = {j.name: j.missing_key() for j in cfg.judges}
    assert missing["gpt"] is None and missing["rules"] is None
    assert "DEEPSEEK_API_KEY" in present(missing["deepseek"]) and "DASHSCOPE_API_KEY" in present(missing["qwen"])


def test_llm_judge_without_model() -> None:
    path = BAD / "config_no_model.yaml"
    with pytest.raises(InputError, match=r"judges\[1 mystery\]: an llm judge needs `model`"):
        load_config(path)


def test_duplicate_judge_names() -> None:
    path = BAD / "config_duplicate_names.yaml"
    with pytest.raises(InputError, match=r"duplicate judge name\(s\): gpt") as ei:
        load_config(path)
    assert str(ei.value).startswith(f"{path}: invalid config:")


@pytest.mark.parametrize(("text", "match"), [
    ("judges: [\n", "not valid YAML"),
    ("- name: rules\n", "must be a mapping"),
    ("rubric: medical_record\n", r"judges: Field required"),
    ("judges: []\n", r"judges: List should have at least 1 item"),
    ("judges:\n  - name: rules\nruns: 0\n", r"runs: Input should be greater than or equal to 1"),
    ("judges:\n  - name: 'bad name!'\n    model: m\n", r"judges\[0 bad name!\]\.name"),
    ("judges:\n  - name: g\n    model: m\n    mode: xml\n", r"judges\[0 g\]\.mode"),
    ("judges:\n  - name: g\n    model: m\n    temperature: 3\n", r"judges\[0 g\]\.temperature"),
    ("judges:\n  - name: rules\nconsensus:\n  aggregate: mode\n", r"consensus\.aggregate"),
    ("judges:\n  - name: rules\nconsensus:\n  trim: 0.5\n", r"consensus\.trim"),
    ("judges:\n  - name: rules\nworkers: 3\n", r"workers: Extra inputs are not permitted"),
])
def test_config_errors(tmp_path: Path, text: str, match: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(InputError, match=match) as ei:
        load_config(p)
    assert str(ei.value).startswith(str(p))


def test_missing_config_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="config file not found") as ei:
        load_config(p)
    assert str(p) in str(ei.value)


def test_judge_kind_inference() -> None:
    assert _judge_config(name="rules").kind == "rules"
    assert _judge_config(name="rules", model="openai/gpt-4.1").kind == "llm"
    assert _judge_config(name="gpt", model="openai/gpt-4.1").kind == "llm"
    with pytest.raises(ValidationError, match="needs `model`"):
        _judge_config(name="gpt")


# --------------------------------------------------------------------------- identity


BASE = dict(name="gpt", model="openai/gpt-4.1", api_key_env="OPENAI_API_KEY", mode="tools", temperature=0.0)


@pytest.mark.parametrize(("field", "value"), [
    ("model", "openai/gpt-4.1-mini"),
    ("temperature", 0.7),
    ("mode", "json"),
    ("api_base", "https://proxy.example/v1"),
    ("max_tokens", 1024),
    ("extra_body", {"reasoning_effort": "high"}),
])
def test_identity_changes_with_what_changes_answers(field: str, value: object) -> None:
    assert _judge_config(**{**BASE, field: value}).identity != _judge_config(**BASE).identity


@pytest.mark.parametrize(("field", "value"), [
    ("concurrency", 64),
    ("rpm", 30),
    ("timeout_s", 10),
    ("max_retries", 0),
    ("max_reasks", 5),
    ("input_cost_per_token", 1e-6),
    ("output_cost_per_token", 4e-6),
    ("api_key_env", "OTHER_KEY"),
])
def test_identity_ignores_operational_settings(field: str, value: object) -> None:
    assert _judge_config(**{**BASE, field: value}).identity == _judge_config(**BASE).identity


def test_identity_is_stable_and_short() -> None:
    a, b = _judge_config(**BASE), _judge_config(**BASE)
    assert a.identity == b.identity
    assert re.fullmatch(r"[0-9a-f]{16}", a.identity)


def test_eval_config_direct_construction() -> None:
    cfg = EvalConfig(judges=[_judge_config(name="rules"), _judge_config(**BASE)])
    assert cfg.rubric == "medical_record" and cfg.prompts_dir is None
    with pytest.raises(ValidationError, match=r"duplicate judge name\(s\): gpt"):
        EvalConfig(judges=[_judge_config(**BASE), _judge_config(**BASE)])
