"""The bad-input corpus: every everyday mistake ends in a clear message and exit 2, never a traceback.

Each entry of :data:`CORPUS` is a short name, the command line (or an API call), the input files it
writes (generated from small templates below, or real files from ``tests/data/bad/``: GBK and BOM
CSVs, a UTF-16 export...), the exit code expected, and the substrings the message must contain (the
file, the line, the field). The commands run in-process through typer's ``CliRunner`` (no LLM is
called: the offline rules judge of ``configs/default.yaml`` scores), and every output is checked for
the absence of "Traceback" and of any exception other than the CLI's own exit.

Placeholders in arguments and expected substrings: ``{d}`` is the case's own folder (its files are
written there), ``{run}`` a fresh copy of a small scored run (4 example cases) in ``{d}/run``,
``{bad}`` the folder ``tests/data/bad``.

Entries marked ``xfail(strict=True, reason="needs CLI: ...")`` describe behaviour that needs a change
in cli.py/api.py (``--encoding``, ``--bootstrap`` checks, ``--allow-failures``, commands that read a
run opening the store read-only); the marks come off as the options land.

Entries are run and judged by the harness shared with ``tests/hostile_corpus.py``
(``tests/bad_input_harness.py``: an entry must end refused or handled; read-only folders are explained
there).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval.analysis.alpha import Level
from consensus_eval.cli import app
from consensus_eval.domain.kinds import Deductions, of_kind
from consensus_eval.domain.sets import duplicates
from consensus_eval.execution.migrations import SCHEMA_VERSION
from tests.bad_input_harness import (
    BAD,
    CASE,
    D_LEAF,
    DROP,
    EXAMPLES,
    RUBRIC_MINI as RUBRIC,
    TCM,
    TREE,
    Entry,
    assert_passes,
    case,
    jl,
    scored_run_in,
    sql,
    store_path,
)

#: an entry of this corpus
Bad = Entry


def cases_n(n: int, start: int = 1) -> list[dict[str, Any]]:
    return [case(id=f"c{i}") for i in range(start, start + n)]


RULES = "judges:\n  - name: rules\n    kind: rules\n"
GPT = "  - name: gpt\n    model: openai/gpt-4.1\n    api_key_env: OPENAI_API_KEY\n"


def gpt_with(extra: str) -> str:
    """A config with one LLM judge whose entry has the YAML lines ``extra`` (indented 4)."""
    return "judges:\n" + GPT + "".join(f"    {line}\n" for line in extra.splitlines())


def extra_body(yaml_block: str) -> str:
    return gpt_with("extra_body:\n" + "\n".join("  " + line for line in yaml_block.splitlines()))


HUMAN_HEAD = "case_id,accuracy,completeness,standardization,categories\n"
RATINGS_HEAD = "unit,rater,value\n"


def ratings(*rows: str) -> str:
    return RATINGS_HEAD + "".join(r + "\n" for r in rows)


GOOD_RATINGS = ["u1,a,3", "u1,b,4", "u2,a,2", "u2,b,2", "u3,a,5", "u3,b,4"]

def trees(*items: Any) -> str:
    return json.dumps(list(items), ensure_ascii=False)


def tcm_line(**fields: Any) -> dict[str, Any]:
    return fields


# --------------------------------------------------------------------------- the table


def score_cases(name: str, content: str | bytes, *expect: str, exit: int = 2, extra: tuple[str, ...] = (),
                absent: tuple[str, ...] = ()) -> Bad:
    """`score` (dry run, the offline default config) of a cases file."""
    return Bad(name, ("score", "{d}/cases.jsonl", "--dry-run", *extra), {"cases.jsonl": content}, exit,
               expect, absent=absent)


def score_config(name: str, content: str | bytes, *expect: str, exit: int = 2, **files: str | bytes) -> Bad:
    """`score` (dry run) of a good cases file with a config."""
    return Bad(name, ("score", "{d}/cases.jsonl", "-c", "{d}/config.yaml", "--dry-run"),
               {"cases.jsonl": jl(CASE), "config.yaml": content, **files}, exit, expect)


def with_rubric(name: str, content: str | bytes | None, *expect: str, rubric_path: str = "{d}/rubric.yaml") -> Bad:
    """`score` (dry run) with a config whose rubric is ``content`` (or an existing file)."""
    files: dict[str, str | bytes] = {"cases.jsonl": jl(CASE),
                                     "config.yaml": f"rubric: {rubric_path}\n" + RULES}
    if content is not None:
        files["rubric.yaml"] = content
    return Bad(name, ("score", "{d}/cases.jsonl", "-c", "{d}/config.yaml", "--dry-run"), files, 2, expect)


def human(name: str, content: str | bytes, *expect: str, exit: int = 2, file: str = "h.csv",
          extra: tuple[str, ...] = (), xfail: str | None = None) -> Bad:
    """`reliability RUN --human FILE` on a copy of the scored run."""
    return Bad(name, ("reliability", "{run}", "--human", "{d}/" + file, "--bootstrap", "0", *extra),
               {file: content}, exit, expect, xfail=xfail)


def rate(name: str, content: str | bytes, *expect: str, exit: int = 2, level: str = "interval",
         extra: tuple[str, ...] = (), file: str = "r.csv", xfail: str | None = None) -> Bad:
    """`reliability --ratings FILE --level LEVEL`."""
    return Bad(name, ("reliability", "--ratings", "{d}/" + file, "--level", level, "--bootstrap", "0", *extra),
               {file: content}, exit, expect, xfail=xfail)


def t2dt(name: str, pred: str | bytes, gold: str | bytes, *expect: str, exit: int = 2,
         extra: tuple[str, ...] = (), pred_name: str = "pred.json", gold_name: str = "gold.json") -> Bad:
    return Bad(name, ("metrics", "text2dt", "{d}/" + pred_name, "{d}/" + gold_name, *extra),
               {pred_name: pred, gold_name: gold}, exit, expect)


def tcm(name: str, task: str, pred: str | bytes, gold: str | bytes, *expect: str, exit: int = 2,
        extra: tuple[str, ...] = ()) -> Bad:
    return Bad(name, ("metrics", "tcm", task, "{d}/pred.jsonl", "{d}/gold.jsonl", *extra),
               {"pred.jsonl": pred, "gold.jsonl": gold}, exit, expect)


def tcm_files(name: str, task: str, of: str, *expect: str) -> Bad:
    """`metrics tcm TASK` given the example files of task ``of``."""
    return Bad(name, ("metrics", "tcm", task, str(TCM / f"{of}_pred.jsonl"), str(TCM / f"{of}_gold.jsonl")),
               {}, 2, expect, absent=("0.0000",))


def store_cmd(name: str, setup: Callable[[Path], None] | None, *expect: str, command: str = "report") -> Bad:
    """``command RUN`` (report by default; audit, reliability) on a copy of the scored run, prepared by ``setup``."""
    args = (command, "{run}", *(("--bootstrap", "0") if command == "reliability" else ()))
    return Bad(f"{command}-{name}", args, {}, 2, expect, setup=setup)


# ----- store set-ups


def corrupt_store(d: Path) -> None:
    store_path(d).write_bytes(os.urandom(4096))


def empty_store(d: Path) -> None:
    store_path(d).write_bytes(b"")


def truncate_store(d: Path) -> None:
    raw = store_path(d).read_bytes()
    store_path(d).write_bytes(raw[: len(raw) // 3])


def newer_schema(d: Path) -> None:
    sql(d, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")


def odd_schema(d: Path) -> None:
    sql(d, "UPDATE meta SET value = '\"abc\"' WHERE key = 'schema_version'")


def foreign_db(d: Path) -> None:
    store_path(d).unlink()
    sql(d, "CREATE TABLE invoices (id INTEGER, total REAL)")


def no_run_recorded(d: Path) -> None:
    sql(d, "DELETE FROM meta WHERE key IN ('config', 'rubric')")


def damaged_meta(d: Path) -> None:
    sql(d, "UPDATE meta SET value = '{not json' WHERE key = 'config'")


def damaged_call(d: Path) -> None:
    sql(d, "UPDATE calls SET judgment = '{\"verdict\": 1}' WHERE status = 'ok'")


def no_store(d: Path) -> None:
    store_path(d).unlink()


def store_is_folder(d: Path) -> None:
    store_path(d).unlink()
    store_path(d).mkdir()


def run_is_file(d: Path) -> None:
    shutil.rmtree(d / "run")
    (d / "run").write_text("not a folder\n", encoding="utf-8")


def output_is_folder(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        target = d / "run" / name
        target.unlink(missing_ok=True)
        target.mkdir()
    return setup


def make_folder(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / name).mkdir(parents=True, exist_ok=True)
    return setup


# ----- API calls


def api_load_config(d: Path) -> object:
    from consensus_eval.domain.config import load_config

    return load_config(d / "config.yaml")


def api_read_only_store(d: Path) -> object:
    from consensus_eval.execution.store import Store

    before = sorted(p.name for p in (d / "run").iterdir())
    with Store.open_existing(d / "run", read_only=True) as store:
        n = len(store.calls())
    assert n > 0 and sorted(p.name for p in (d / "run").iterdir()) == before  # no -wal, no -shm, nothing
    return n


def api_store_at(relative: str) -> Callable[[Path], object]:
    def call(d: Path) -> object:
        from consensus_eval.execution.store import Store

        with Store(d / relative) as store:
            return store.plan_size()
    return call


def api_ratings(level: Level | None = None, encoding: str | None = None) -> Callable[[Path], object]:
    def call(d: Path) -> object:
        from consensus_eval.analysis.alpha import load_ratings

        return load_ratings(d / "r.csv", encoding, level=level)
    return call


def api_human(encoding: str | None = None, file: str = "h.csv") -> Callable[[Path], object]:
    def call(d: Path) -> object:
        from consensus_eval.analysis.agreement import load_human
        from consensus_eval.domain.rubric import load_rubric

        return load_human(d / file, load_rubric("medical_record"), encoding)
    return call


def api_read_text(encoding: str | None = None, file: str = "f.txt",
                  expect: str | None = None) -> Callable[[Path], object]:
    def call(d: Path) -> object:
        from consensus_eval.domain.textio import read_text

        text = read_text(d / file, encoding, what="test")
        if expect is not None:
            assert text == expect, text
        return text
    return call


def api(name: str, call: Callable[[Path], object], *expect: str, exit: int = 2,
        files: dict[str, str | bytes] | None = None, setup: Callable[[Path], None] | None = None,
        read_only: bool = False) -> Bad:
    return Bad(name, (), files or {}, exit, expect, call=call, setup=setup, read_only=read_only)


NEEDS_ENCODING = "needs CLI: --encoding (passed to load_human / load_ratings)"
NEEDS_RO = "needs API: load_run opens the store with Store.open_existing(folder, read_only=True)"

HUMAN_OK = HUMAN_HEAD + "case-01,38,33,24,\ncase-02,30,35,20,数值准确性\n"

CORPUS: list[Bad] = [
    # ================================================================ cases JSONL
    score_cases("cases-missing-record", jl(case(id="c1"), case(id="c2", record=DROP)),
                "{d}/cases.jsonl:2: record: Field required"),
    score_cases("cases-missing-id", jl(case(id=DROP)), "{d}/cases.jsonl:1: id: Field required"),
    score_cases("cases-missing-conversation", jl(case(conversation=DROP)),
                "{d}/cases.jsonl:1: conversation: Field required"),
    score_cases("cases-empty-record", jl(case(record="")), "{d}/cases.jsonl:1: record: the record to score is empty"),
    score_cases("cases-blank-record", jl(case(record="  \n ")),
                "{d}/cases.jsonl:1: record: the record to score is empty"),
    score_cases("cases-empty-conversation-text", jl(case(conversation="")),
                "{d}/cases.jsonl:1: conversation: the conversation is empty"),
    score_cases("cases-empty-conversation-list", jl(case(conversation=[])),
                "{d}/cases.jsonl:1: conversation: the conversation is empty"),
    score_cases("cases-empty-id", jl(case(id="")), "{d}/cases.jsonl:1: id:"),
    score_cases("cases-null-id", jl(case(id=None)), "{d}/cases.jsonl:1: id:"),
    score_cases("cases-list-id", jl(case(id=["a"])), "{d}/cases.jsonl:1: id:"),
    score_cases("cases-bool-id", jl(case(id=True)), "{d}/cases.jsonl:1: id:"),
    score_cases("cases-float-id", jl(case(id=1.5)), "{d}/cases.jsonl:1: id:"),
    score_cases("cases-record-number", jl(case(record=5)), "{d}/cases.jsonl:1: record:"),
    score_cases("cases-record-list", jl(case(record=["主诉"])), "{d}/cases.jsonl:1: record:"),
    score_cases("cases-conversation-number", jl(case(conversation=3)), "{d}/cases.jsonl:1: conversation"),
    score_cases("cases-conversation-strings", jl(case(conversation=["医生：你好", "患者：你好"])),
                "{d}/cases.jsonl:1: conversation"),
    score_cases("cases-turn-without-role", jl(case(conversation=[{"text": "你好"}])), "{d}/cases.jsonl:1:", "role"),
    score_cases("cases-turn-empty-role", jl(case(conversation=[{"role": "", "text": "你好"}])),
                "{d}/cases.jsonl:1:", "role"),
    score_cases("cases-turn-text-number", jl(case(conversation=[{"role": "doctor", "text": 3}])),
                "{d}/cases.jsonl:1:", "text"),
    score_cases("cases-turn-extra-field", jl(case(conversation=[{"role": "doctor", "text": "hi", "time": 1}])),
                "{d}/cases.jsonl:1:", "time: Extra inputs are not permitted"),
    score_cases("cases-important-yes", jl(case(important="yes")),
                "{d}/cases.jsonl:1: important: Input should be a valid boolean"),
    score_cases("cases-important-one", jl(case(important=1)), "{d}/cases.jsonl:1: important:"),
    score_cases("cases-meta-list", jl(case(meta=[1, 2])), "{d}/cases.jsonl:1: meta:"),
    score_cases("cases-unknown-field", jl(case(summary="x")),
                "{d}/cases.jsonl:1: summary: Extra inputs are not permitted"),
    score_cases("cases-bad-json-line-1", jl("{not json", case(id="c2")), "{d}/cases.jsonl:1: not valid JSON"),
    score_cases("cases-bad-json-line-3", jl(*cases_n(2), '{"id": "c3", "record": }'),
                "{d}/cases.jsonl:3: not valid JSON"),
    score_cases("cases-bad-json-line-7", jl(*cases_n(6), "{'id': 'c7'}"), "{d}/cases.jsonl:7: not valid JSON"),
    score_cases("cases-truncated-last-line", jl(*cases_n(2)) + '{"id": "c3", "conversation": "医生：',
                "{d}/cases.jsonl:3: not valid JSON"),
    score_cases("cases-trailing-comma", jl('{"id": "c1", "conversation": "x", "record": "y",}'),
                "{d}/cases.jsonl:1: not valid JSON"),
    score_cases("cases-line-is-array", jl(case(), "[1, 2]"),
                "{d}/cases.jsonl:2: a case must be a JSON object, got an array"),
    score_cases("cases-line-is-string", jl('"case"'), "{d}/cases.jsonl:1: a case must be a JSON object, got a string"),
    score_cases("cases-line-is-number", jl("42"), "{d}/cases.jsonl:1: a case must be a JSON object"),
    score_cases("cases-line-is-null", jl("null"), "{d}/cases.jsonl:1: a case must be a JSON object"),
    score_cases("cases-duplicate-id", jl(case(id="c1"), case(id="c2"), case(id="c1")),
                "{d}/cases.jsonl:3: id: duplicate case id 'c1' (first on line 1)"),
    score_cases("cases-duplicate-int-and-str-id", jl(case(id=7), case(id="7")),
                "{d}/cases.jsonl:2: id: duplicate case id '7'"),
    score_cases("cases-several-errors-listed",
                jl(case(record=DROP), "[1]", case(id="c2", important="no"), case(id="c9")),
                "3 invalid line(s) in {d}/cases.jsonl", "{d}/cases.jsonl:1:", "{d}/cases.jsonl:2:",
                "{d}/cases.jsonl:3:", "--skip-invalid"),
    score_cases("cases-non-utf8-latin1",
                jl(case()).encode() + jl({"id": "c2", "conversation": "x", "record": "café"}).encode("latin-1"),
                "{d}/cases.jsonl:2: not UTF-8", "must be saved as UTF-8"),
    Bad("cases-gbk-file", ("score", "{bad}/cases_gbk.jsonl", "--dry-run"), {}, 2,
        ("{bad}/cases_gbk.jsonl:1: not UTF-8", "must be saved as UTF-8")),
    score_cases("cases-utf16-file", jl(case()).encode("utf-16"), "{d}/cases.jsonl:1: not UTF-8"),
    score_cases("cases-control-char-in-id", jl(case(id="a\u0007b")), "{d}/cases.jsonl:1: id:", "control character"),
    score_cases("cases-newline-in-id", jl(case(id="a\nb")), "{d}/cases.jsonl:1: id:", "line break"),
    score_cases("cases-cr-in-id", jl(case(id="a\rb")), "{d}/cases.jsonl:1: id:", "control character"),
    score_cases("cases-tab-in-id", jl(case(id="a\tb")), "{d}/cases.jsonl:1: id:", "control character"),
    score_cases("cases-nul-in-id", jl(case(id="a\u0000b")), "{d}/cases.jsonl:1: id:", "control character"),
    score_cases("cases-line-separator-in-id", jl(case(id="a\u2028b")), "{d}/cases.jsonl:1: id:", "line break"),
    score_cases("cases-blank-id", jl(case(id="   ")), "{d}/cases.jsonl:1: id:", "blank"),
    score_cases("cases-empty-file", "", "{d}/cases.jsonl: no cases (the file is empty)"),
    score_cases("cases-blank-lines-only", "\n  \n\n", "{d}/cases.jsonl: no cases (the file is empty)"),
    Bad("cases-file-missing", ("score", "{d}/nope.jsonl", "--dry-run"), {}, 2, ("{d}/nope.jsonl", "cannot read cases")),
    Bad("cases-path-is-folder", ("score", "{d}/cases", "--dry-run"), {}, 2, ("{d}/cases", "is a folder"),
        setup=make_folder("cases")),
    Bad("cases-skip-invalid-but-none-valid", ("score", "{d}/cases.jsonl", "--skip-invalid", "--out", "{d}/out"),
        {"cases.jsonl": jl(case(record=DROP), "[1]")}, 2, ("{d}/cases.jsonl", "no valid case")),
    # the positive side: what must keep working
    score_cases("cases-ok-skip-invalid-one-bad", jl(case(), "[1]"), "skipped", "{d}/cases.jsonl:2", exit=0,
                extra=("--skip-invalid",)),
    Bad("cases-ok-bom-tolerated", ("score", "{bad}/cases_bom.jsonl", "--dry-run"), {}, 0, ("rules",)),
    score_cases("cases-ok-crlf-line-ends", jl(*cases_n(2)).replace("\n", "\r\n"), "rules", exit=0),
    score_cases("cases-ok-chinese-id", jl(case(id="病例-一")), "rules", exit=0),

    # ================================================================ config YAML
    score_config("config-unknown-top-field", RULES + "workers: 3\n", "{d}/config.yaml",
                 "workers: Extra inputs are not permitted"),
    score_config("config-unknown-judge-field", "judges:\n" + GPT + "    temprature: 0.2\n",
                 "{d}/config.yaml", "judges[0 gpt].temprature: Extra inputs are not permitted"),
    Bad("config-unknown-field-real-file",
        ("score", "{d}/cases.jsonl", "-c", "{bad}/config_unknown_field.yaml", "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 2, ("{bad}/config_unknown_field.yaml", "Extra inputs are not permitted")),
    score_config("config-runs-zero", RULES + "runs: 0\n", "runs: Input should be greater than or equal to 1"),
    score_config("config-runs-word", RULES + "runs: two\n", "runs: Input should be a valid integer"),
    score_config("config-important-runs-negative", RULES + "important_runs: -1\n", "important_runs:"),
    score_config("config-judges-empty", "judges: []\n", "judges: List should have at least 1 item"),
    score_config("config-judges-missing", "rubric: medical_record\n", "judges: Field required"),
    score_config("config-judges-string", "judges: rules\n", "judges:"),
    score_config("config-judge-entry-string", "judges:\n  - rules\n", "judges[0]:", "dictionary"),
    score_config("config-judge-without-name", "judges:\n  - kind: rules\n", "name: Field required"),
    score_config("config-judge-bad-name", "judges:\n  - name: 'bad name!'\n    model: m\n",
                 "judges[0 bad name!].name"),
    score_config("config-mode-unknown", gpt_with("mode: xml"), "judges[0 gpt].mode"),
    score_config("config-temperature-too-high", gpt_with("temperature: 3"), "judges[0 gpt].temperature"),
    score_config("config-temperature-word", gpt_with("temperature: hot"), "judges[0 gpt].temperature"),
    score_config("config-max-tokens-zero", gpt_with("max_tokens: 0"), "judges[0 gpt].max_tokens"),
    score_config("config-concurrency-zero", gpt_with("concurrency: 0"), "judges[0 gpt].concurrency"),
    score_config("config-timeout-negative", gpt_with("timeout_s: -1"), "judges[0 gpt].timeout_s"),
    score_config("config-rpm-zero", gpt_with("rpm: 0"), "judges[0 gpt].rpm"),
    score_config("config-max-retries-negative", gpt_with("max_retries: -1"), "judges[0 gpt].max_retries"),
    score_config("config-cost-negative", gpt_with("input_cost_per_token: -1"), "judges[0 gpt].input_cost_per_token"),
    score_config("config-max-case-chars-zero", gpt_with("max_case_chars: 0"), "judges[0 gpt].max_case_chars"),
    score_config("config-extra-body-not-mapping", gpt_with("extra_body: [1, 2]"), "judges[0 gpt].extra_body"),
    score_config("config-unknown-aggregator", RULES + "consensus:\n  aggregate: mode\n", "consensus.aggregate",
                 "mode"),
    score_config("config-trim-half", RULES + "consensus:\n  trim: 0.5\n", "consensus.trim"),
    score_config("config-min-judges-zero", RULES + "consensus:\n  min_judges: 0\n", "consensus.min_judges"),
    score_config("config-min-judges-above-one-judge", RULES + "consensus:\n  min_judges: 3\n",
                 "consensus.min_judges is 3", "the panel has 1 judge(s)"),
    score_config("config-min-judges-above-two-judges",
                 "consensus:\n  min_judges: 3\njudges:\n  - {name: a, kind: rules}\n  - {name: b, kind: rules}\n",
                 "consensus.min_judges is 3", "the panel has 2 judge(s)"),
    score_config("config-consensus-unknown-field", RULES + "consensus:\n  quorum: 2\n",
                 "consensus.quorum: Extra inputs are not permitted"),
    score_config("config-consensus-list", RULES + "consensus: [mean]\n", "consensus:"),
    score_config("config-flag-star-gap-zero", RULES + "consensus:\n  flag_star_gap: 0\n", "consensus.flag_star_gap"),
    score_config("config-unknown-judge-kind", "judges:\n  - name: g\n    kind: gpt5\n", "unknown judge kind 'gpt5'",
                 "known kinds"),
    score_config("config-llm-without-model", "judges:\n  - name: gpt\n    kind: llm\n", "needs `model`"),
    Bad("config-no-model-real-file", ("score", "{d}/cases.jsonl", "-c", "{bad}/config_no_model.yaml", "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 2, ("{bad}/config_no_model.yaml", "needs `model`")),
    score_config("config-api-key-env-is-a-key", gpt_with("").replace("OPENAI_API_KEY", "sk-abcdefghijklmnop1234567890"),
                 "{d}/config.yaml:4:", "literal API key"),
    score_config("config-api-key-field", "judges:\n" + GPT + "    api_key: hunter2\n", "{d}/config.yaml:5:",
                 "literal API key"),
    Bad("config-literal-key-in-extra-body", ("score", "{d}/cases.jsonl", "-c", "{bad}/config_literal_key.yaml",
                                             "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 2, ("{bad}/config_literal_key.yaml:7:", "api_key_env")),
    score_config("config-extra-body-authorization", extra_body("headers:\n  Authorization: Bearer abc"),
                 "judges[0 gpt].extra_body", "extra_body.headers.Authorization", "api_key_env"),
    score_config("config-extra-body-api-key", extra_body("api-key: abc"), "extra_body.api-key", "api_key_env"),
    score_config("config-extra-body-x-api-key-upper", extra_body("headers:\n  X-API-KEY: abc"),
                 "extra_body.headers.X-API-KEY", "api_key_env"),
    score_config("config-extra-body-api_key-underscore", extra_body("api_key_value: abc"),
                 "{d}/config.yaml"),
    score_config("config-extra-body-nested-token", extra_body("auth:\n  oauth:\n    access_token: abc"),
                 "extra_body.auth.oauth.access_token", "api_key_env"),
    score_config("config-extra-body-client-secret", extra_body("client_secret: abc"), "extra_body.client_secret"),
    score_config("config-extra-body-password", extra_body("headers:\n  Password: abc"), "extra_body.headers.Password"),
    score_config("config-extra-body-auth-token-header", extra_body("headers:\n  X-Auth-Token: abc"),
                 "extra_body.headers.X-Auth-Token"),
    score_config("config-extra-body-token-in-list", extra_body("tools:\n  - {name: t, Token: abc}"),
                 "extra_body.tools[0].Token"),
    score_config("config-rules-judge-with-model", "judges:\n  - name: rules\n    kind: rules\n    model: openai/x\n",
                 "judges[0 rules]", "`model`", "LLM settings on a rules judge"),
    score_config("config-rules-judge-with-temperature",
                 "judges:\n  - name: r\n    kind: rules\n    temperature: 0.2\n    max_tokens: 10\n",
                 "judges[0 r]", "`temperature`, `max_tokens`", "a rules judge takes only"),
    score_config("config-rules-judge-with-api-key-env",
                 "judges:\n  - name: r\n    kind: rules\n    api_key_env: OPENAI_API_KEY\n", "`api_key_env`"),
    score_config("config-duplicate-judge-names", "judges:\n  - {name: a, kind: rules}\n  - {name: a, kind: rules}\n",
                 "duplicate judge name(s): a"),
    score_config("config-invalid-utf8", b"# \xff\xfe broken\n" + RULES.encode(),
                 "{d}/config.yaml: config file is neither UTF-8 nor GB18030/GBK text: line 1, byte 2 (0xff)",
                 "save it as UTF-8"),
    score_config("config-invalid-utf8-line-3", RULES.encode() + b"runs: 1 # \x80\n", "{d}/config.yaml",
                 "line 4, byte"),
    score_config("config-not-a-mapping-list", "- name: rules\n", "must be a mapping"),
    score_config("config-not-a-mapping-scalar", "hello\n", "must be a mapping"),
    score_config("config-empty-file", "", "must be a mapping"),
    score_config("config-invalid-yaml", "judges: [\n", "{d}/config.yaml", "not valid YAML"),
    score_config("config-tab-indentation", "judges:\n\t- name: rules\n", "{d}/config.yaml", "not valid YAML"),
    Bad("config-file-missing", ("score", "{d}/cases.jsonl", "-c", "{d}/nope.yaml", "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 2, ("{d}/nope.yaml", "config file not found")),
    Bad("config-path-is-folder", ("score", "{d}/cases.jsonl", "-c", "{d}/conf", "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 2, ("{d}/conf", "is a folder"), setup=make_folder("conf")),
    score_config("config-unknown-rubric-name", "rubric: no_such_rubric\n" + RULES, "no_such_rubric",
                 "rubric file not found"),
    # the positive side
    api("config-ok-extra-body-token-counts", api_load_config, exit=0,
        files={"config.yaml": extra_body("max_tokens: 5\nmax_completion_tokens: 5\nthinking: {budget_tokens: 64}\n"
                                         "tokenizer: x\nreturn_token_ids: true")}),
    Bad("config-ok-gbk", ("score", "{d}/cases.jsonl", "-c", "{bad}/config_gbk.yaml", "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 0, ("rules",)),
    Bad("config-ok-bom", ("score", "{d}/cases.jsonl", "-c", "{bad}/config_bom.yaml", "--dry-run"),
        {"cases.jsonl": jl(CASE)}, 0, ("rules",)),

    # ================================================================ rubric YAML
    *(Bad(f"rubric-real-{name.removeprefix('rubric_').removesuffix('.yaml')}",
          ("score", "{d}/cases.jsonl", "-c", "{d}/config.yaml", "--dry-run"),
          {"cases.jsonl": jl(CASE), "config.yaml": f"rubric: {BAD / name}\n" + RULES}, 2, (str(BAD / name), *want))
      for name, want in [
          ("rubric_caps.yaml", ("dimensions[0 quality]", "caps sum to 9")),
          ("rubric_thresholds.yaml", ("dimensions[0 quality]", "decrease strictly")),
          ("rubric_thresholds_range.yaml", ("within 0..10",)),
          ("rubric_duplicate_category.yaml", ("duplicate category id(s): facts",)),
          ("rubric_duplicate_type.yaml", ("duplicate deduction type id(s): fact_wrong",)),
          ("rubric_duplicate_dimension.yaml", ("duplicate dimension id(s): quality",)),
          ("rubric_range_reversed.yaml", ("types[0 style_poor].points", "low <= high")),
          ("rubric_unknown_field.yaml", ("categories[1 style].kap", "Extra inputs")),
          ("rubric_invalid_yaml.yaml", ("not valid YAML",)),
          ("rubric_not_mapping.yaml", ("must be a mapping",)),
      ]),
    with_rubric("rubric-invalid-utf8", RUBRIC.encode() + b"# \xff\n", "{d}/rubric.yaml", "utf-8"),
    with_rubric("rubric-empty-file", "", "{d}/rubric.yaml", "must be a mapping"),
    with_rubric("rubric-missing-file", None, "{d}/rubric.yaml", "rubric file not found"),
    with_rubric("rubric-no-dimensions", "id: mini\nname: mini\ndimensions: []\n", "{d}/rubric.yaml", "dimensions"),
    with_rubric("rubric-dimension-without-max", RUBRIC.replace("    max: 10\n", ""), "{d}/rubric.yaml",
                "dimensions[0 quality].max"),
    with_rubric("rubric-points-word", RUBRIC.replace("points: 2}", "points: two}"), "{d}/rubric.yaml",
                "types[0 fact_wrong].points"),
    with_rubric("rubric-required-section-unlisted", RUBRIC + "required_sections: [主诉]\n", "{d}/rubric.yaml",
                "required_sections"),
    with_rubric("rubric-without-rules", RUBRIC, "no rules are registered for rubric 'mini'"),

    # ================================================================ human labels (reliability --human)
    Bad("human-ok-bom-real-file", ("reliability", "{run}", "--human", "{bad}/human_bom.csv", "--bootstrap", "0"),
        {}, 0, ("human",)),
    Bad("human-ok-gbk-real-file", ("reliability", "{run}", "--human", "{bad}/human_gbk.csv", "--bootstrap", "0"),
        {}, 0, ("human",)),
    human("human-ok-bom-generated", ("\ufeff" + HUMAN_OK).encode(), "human", exit=0),
    human("human-ok-gbk-generated", HUMAN_OK.encode("gbk"), "human", exit=0),
    human("human-ok-gb18030-generated", HUMAN_OK.replace("case-02", "case-02").encode("gb18030"), "human", exit=0),
    human("human-ok-jsonl", jl({"case_id": "case-01", "accuracy": 38}, {"case_id": "case-02", "total": 80}),
          "human", exit=0, file="h.jsonl"),
    human("human-missing-case-id-column", "id,accuracy\ncase-01,30\n", "{d}/h.csv:1: no column named case_id",
          "'id'"),
    human("human-missing-case-id-value", HUMAN_HEAD + "case-01,30,30,20,\n,30,30,20,\n",
          "{d}/h.csv:3: case_id: missing"),
    human("human-out-of-range", HUMAN_HEAD + "case-01,50,30,20,\n", "{d}/h.csv:2: accuracy: 50 is outside 0..40"),
    human("human-negative-score", HUMAN_HEAD + "case-01,30,-1,20,\n", "{d}/h.csv:2: completeness: -1 is outside 0..35"),
    human("human-not-a-number", HUMAN_HEAD + "case-01,abc,30,20,\n", "{d}/h.csv:2: accuracy: not a number: 'abc'"),
    human("human-inf", HUMAN_HEAD + "case-01,inf,30,20,\n", "{d}/h.csv:2: accuracy: not a finite number"),
    human("human-nan", HUMAN_HEAD + "case-01,30,nan,20,\n", "{d}/h.csv:2: completeness: not a finite number"),
    human("human-unknown-category", HUMAN_HEAD + "case-01,30,30,20,数值;药物\n",
          "{d}/h.csv:2: categories: unknown category '数值'"),
    human("human-duplicate-case", HUMAN_HEAD + "case-01,30,30,20,\ncase-01,31,30,20,\n",
          "{d}/h.csv:3: case_id: duplicate 'case-01' (first on line 2)"),
    human("human-ids-match-nothing", HUMAN_HEAD + "x-1,30,30,20,\nx-2,30,30,20,\n",
          "none of the 2 case ids in {d}/h.csv is a case of this run (first: 'x-1'"),
    human("human-no-score-column", "case_id,score\ncase-01,30\n", "{d}/h.csv:1: no column named accuracy",
          "would match nothing", "'score'"),
    human("human-extra-cells", HUMAN_HEAD + "case-01,30,30,20,,oops\n", "{d}/h.csv:2: more cells than the header"),
    human("human-jsonl-line-not-object", jl({"case_id": "case-01", "accuracy": 30}, [1, 2]),
          "{d}/h.jsonl:2: a human label must be a JSON object", file="h.jsonl"),
    human("human-jsonl-line-string", jl('"case-01"'), "{d}/h.jsonl:1: a human label must be a JSON object",
          file="h.jsonl"),
    human("human-jsonl-bad-json", jl({"case_id": "case-01", "accuracy": 30}, "{case_id: 1}"),
          "{d}/h.jsonl:2: not valid JSON", file="h.jsonl"),
    human("human-jsonl-no-known-key", jl({"case_id": "case-01", "score": 30}), "{d}/h.jsonl: no line has a key named",
          file="h.jsonl"),
    human("human-jsonl-unknown-category-list", jl({"case_id": "case-01", "categories": ["numbers", "nope"]}),
          "{d}/h.jsonl:1: categories: unknown category 'nope'", file="h.jsonl"),
    human("human-jsonl-categories-object", jl({"case_id": "case-01", "categories": {"numbers": 1}}),
          "{d}/h.jsonl:1: categories:", file="h.jsonl"),
    human("human-jsonl-case-id-object", jl({"case_id": {"x": 1}, "accuracy": 30}), "{d}/h.jsonl:1: case_id:",
          file="h.jsonl"),
    human("human-jsonl-score-bool", jl({"case_id": "case-01", "accuracy": True}),
          "{d}/h.jsonl:1: accuracy: not a number", file="h.jsonl"),
    human("human-jsonl-score-word", jl({"case_id": "case-01", "accuracy": "thirty"}),
          "{d}/h.jsonl:1: accuracy: not a number", file="h.jsonl"),
    Bad("human-file-missing", ("reliability", "{run}", "--human", "{d}/nope.csv", "--bootstrap", "0"), {}, 2,
        ("{d}/nope.csv", "not found")),
    Bad("human-path-is-folder", ("reliability", "{run}", "--human", "{d}/labels", "--bootstrap", "0"), {}, 2,
        ("{d}/labels", "is a folder"), setup=make_folder("labels")),
    human("human-neither-utf8-nor-gbk", HUMAN_HEAD.encode() + b"case-01,30,30,20,\x80\xff\n",
          "{d}/h.csv", "neither UTF-8 nor GB18030", "line 2", "--encoding"),
    human("human-empty-file", "", "{d}/h.csv: no header line"),
    human("human-header-only", HUMAN_HEAD, "{d}/h.csv: no human labels"),
    # the sheet `audit --export` writes reads back: left empty, it holds no label
    Bad("human-audit-export-read-back", ("reliability", "{run}", "--human", "{d}/sheet.csv", "--bootstrap", "0"),
        {}, 0, ("no human cell is filled in",), absent=("case_id: missing",),
        setup=lambda d: _export_sheet(d)),
    human("human-encoding-latin1", (HUMAN_HEAD + "case-01,30,30,20,Zoë\n").encode("latin-1"),
          "{d}/h.csv:2: categories: unknown category 'Zoë'",
          extra=("--encoding", "latin-1")),
    human("human-encoding-unknown", HUMAN_OK, "unknown encoding", extra=("--encoding", "klingon")),
    api("human-api-encoding-given", api_human("cp1252"), exit=0,
        files={"h.csv": (HUMAN_HEAD + "case-01,30,30,20,\n").encode("cp1252")}),
    api("human-api-encoding-wrong", api_human("ascii"), "{d}/h.csv: human labels file is not ascii text", "line 3",
        files={"h.csv": HUMAN_OK.encode()}),

    # ================================================================ ratings CSV (reliability --ratings)
    rate("ratings-missing-rater-column", "unit,judge,value\nu1,a,3\n", "{d}/r.csv:1: no column named rater",
         "'judge'"),
    rate("ratings-wrong-header", "a,b,c\n1,2,3\n", "{d}/r.csv:1: no column named rater, unit, value"),
    # `;` or tab as the header uses: the one table reader of every command
    rate("ratings-ok-semicolons", "unit;rater;value\nu1;a;3\nu1;b;2,5\nu2;a;1\nu2;b;1\n", "alpha", exit=0),
    rate("ratings-empty-file", "", "{d}/r.csv:1: no column named"),
    rate("ratings-header-only", RATINGS_HEAD, "{d}/r.csv: no ratings"),
    rate("ratings-not-a-number", ratings("u1,a,3", "u1,b,three"), "{d}/r.csv:3: value: not a number: 'three'"),
    rate("ratings-inf", ratings("u1,a,3", "u1,b,inf"), "{d}/r.csv:3: value: 'inf' is not a finite number"),
    rate("ratings-minus-inf", ratings("u1,a,-inf", "u1,b,3"), "{d}/r.csv:2: value: '-inf' is not a finite number"),
    rate("ratings-infinity", ratings("u1,a,Infinity", "u1,b,3"), "{d}/r.csv:2: value: 'Infinity'"),
    rate("ratings-nan", ratings("u1,a,3", "u1,b,nan"), "{d}/r.csv:3: value: 'nan' is not a finite number"),
    rate("ratings-NaN", ratings("u1,a,NaN", "u1,b,3"), "{d}/r.csv:2: value: 'NaN' is not a finite number"),
    rate("ratings-negative-at-ratio", ratings(*GOOD_RATINGS, "u4,a,-2", "u4,b,1"), "negative", "ratio",
         level="ratio"),
    rate("ratings-negative-at-ratio-names-line", ratings(*GOOD_RATINGS, "u4,a,-2", "u4,b,1"),
         "{d}/r.csv:8: value: -2 is negative", level="ratio"),
    api("ratings-api-negative-at-ratio", api_ratings("ratio"), "{d}/r.csv:3: value: -2 is negative",
        files={"r.csv": ratings("u1,a,3", "u1,b,-2")}),
    rate("ratings-duplicate", ratings("u1,a,3", "u1,a,4"), "{d}/r.csv:3: rater 'a' rated unit 'u1' twice"),
    rate("ratings-missing-unit", ratings("u1,a,3", ",b,4"), "{d}/r.csv:3: unit: missing"),
    rate("ratings-missing-rater", ratings("u1,a,3", "u1,,4"), "{d}/r.csv:3: rater: missing"),
    rate("ratings-unknown-level", ratings(*GOOD_RATINGS), "--level must be one of", level="nominalish"),
    Bad("ratings-file-missing", ("reliability", "--ratings", "{d}/nope.csv"), {}, 2, ("{d}/nope.csv", "not found")),
    Bad("ratings-path-is-folder", ("reliability", "--ratings", "{d}/rr"), {}, 2, ("{d}/rr", "is a folder"),
        setup=make_folder("rr")),
    Bad("ratings-neither-encoding", ("reliability", "--ratings", "{bad}/ratings_cp1252.csv"), {}, 2,
        ("{bad}/ratings_cp1252.csv", "neither UTF-8 nor GB18030", "line 2, byte 24 (0xe9)", "--encoding")),
    Bad("ratings-ok-utf16-tab-separated", ("reliability", "--ratings", "{bad}/ratings_utf16.txt"), {}, 0,
        ("alpha",)),
    Bad("ratings-no-run-no-ratings", ("reliability",), {}, 2, ("give a run folder (RUN_DIR) or --ratings",)),
    rate("ratings-bootstrap-negative", ratings(*GOOD_RATINGS), "--bootstrap", extra=("--bootstrap", "-5")),
    rate("ratings-encoding-cp1252", (BAD / "ratings_cp1252.csv").read_bytes(), "2 raters", exit=0,
         extra=("--encoding", "cp1252")),
    rate("ratings-encoding-unknown", ratings(*GOOD_RATINGS), "unknown encoding", extra=("--encoding", "klingon")),
    api("ratings-api-encoding-cp1252", api_ratings(encoding="cp1252"), exit=0,
        files={"r.csv": (BAD / "ratings_cp1252.csv").read_bytes()}),
    api("ratings-api-encoding-unknown", api_ratings(encoding="klingon"), "{d}/r.csv", "unknown encoding 'klingon'",
        files={"r.csv": ratings(*GOOD_RATINGS)}),
    # the positive side
    Bad("ratings-ok-gbk-real-file", ("reliability", "--ratings", "{bad}/ratings_gbk.csv", "--bootstrap", "0"), {}, 0,
        ("2 raters", "3 of 3 units")),
    Bad("ratings-ok-bom-real-file", ("reliability", "--ratings", "{bad}/ratings_bom.csv", "--bootstrap", "0"), {}, 0,
        ("2 raters", "3 of 3 units")),
    rate("ratings-ok-negative-at-interval", ratings(*GOOD_RATINGS, "u4,a,-2", "u4,b,-1"), "alpha", exit=0),
    rate("ratings-ok-missing-marks", ratings(*GOOD_RATINGS, "u4,a,", "u4,b,NA", "u5,a,."), "alpha", exit=0),
    rate("ratings-ok-spaces-in-header", " unit , rater , value\n" + "\n".join(GOOD_RATINGS) + "\n", "alpha", exit=0),
    rate("ratings-ok-all-missing-undefined", ratings("u1,a,", "u1,b,"), "undefined", exit=0),

    # ================================================================ the store
    store_cmd("no-store", no_store, "{d}/run/results.sqlite: no store here"),
    store_cmd("no-store", no_store, "no store here", command="audit"),
    store_cmd("no-store", no_store, "no store here", command="reliability"),
    store_cmd("missing-folder", lambda d: shutil.rmtree(d / "run"), "no store here"),
    store_cmd("corrupt", corrupt_store, "{d}/run/results.sqlite: not a consensus-eval store",
              "not an SQLite database"),
    store_cmd("corrupt", corrupt_store, "{d}/run/results.sqlite: not a consensus-eval store", command="audit"),
    store_cmd("corrupt", corrupt_store, "{d}/run/results.sqlite: not a consensus-eval store", command="reliability"),
    Bad("score-into-corrupt-store", ("score", "{d}/cases.jsonl", "--out", "{run}"), {"cases.jsonl": jl(CASE)}, 2,
        ("{d}/run/results.sqlite: not a consensus-eval store",), setup=corrupt_store),
    store_cmd("truncated", truncate_store, "{d}/run/results.sqlite", "damaged"),
    store_cmd("empty-file", empty_store, "{d}/run/results.sqlite: an empty file, not a consensus-eval store"),
    store_cmd("newer-schema", newer_schema, "schema version 99", "written by a newer consensus-eval",
              f"reads schema versions 1 to {SCHEMA_VERSION}"),
    store_cmd("newer-schema", newer_schema, "written by a newer consensus-eval", command="audit"),
    store_cmd("newer-schema", newer_schema, "written by a newer consensus-eval", command="reliability"),
    Bad("score-into-newer-schema", ("score", "{d}/cases.jsonl", "--out", "{run}"), {"cases.jsonl": jl(CASE)}, 2,
        ("written by a newer consensus-eval",), setup=newer_schema),
    store_cmd("odd-schema", odd_schema, "not a consensus-eval store", "'abc'"),
    store_cmd("foreign-sqlite", foreign_db, "not a consensus-eval store"),
    Bad("score-into-foreign-sqlite", ("score", "{d}/cases.jsonl", "--out", "{run}"), {"cases.jsonl": jl(CASE)}, 2,
        ("not a consensus-eval store", "invoices"), setup=foreign_db),
    store_cmd("no-run-recorded", no_run_recorded, "no run is recorded in this store"),
    store_cmd("damaged-meta", damaged_meta, "damaged store: meta 'config' is not JSON"),
    store_cmd("damaged-call", damaged_call, "{d}/run/results.sqlite: damaged store: the call"),
    store_cmd("damaged-call", damaged_call, "damaged store: the call", command="audit"),
    store_cmd("run-is-a-file", run_is_file, "{d}/run: is a file"),
    store_cmd("store-is-a-folder", store_is_folder, "no store here"),
    Bad("audit-read-only-folder", ("audit", "{run}"), {}, 0, ("case-01",), read_only=True),
    Bad("report-read-only-folder", ("report", "{run}"), {}, 2, ("report.md", "read-only"), read_only=True),
    Bad("reliability-read-only-folder", ("reliability", "{run}", "--bootstrap", "0"), {}, 2,
        ("reliability.json", "read-only"), read_only=True),
    Bad("reliability-read-only-folder-is-2-now", ("reliability", "{run}", "--bootstrap", "0"), {}, 2,
        ("read-only",), read_only=True),
    api("store-api-read-only-folder-opens", api_read_only_store, exit=0, read_only=True),
    api("store-api-read-only-open-corrupt",
        lambda d: __import__("consensus_eval.execution.store", fromlist=["Store"]).Store.open_existing(
            d / "run", read_only=True), "not a consensus-eval store", setup=corrupt_store),
    api("store-api-newer-schema-read-only",
        lambda d: __import__("consensus_eval.execution.store", fromlist=["Store"]).Store.open_existing(
            d / "run", read_only=True), "written by a newer consensus-eval", setup=newer_schema),

    # ================================================================ outputs
    Bad("score-out-is-a-file", ("score", "{d}/cases.jsonl", "--out", "{d}/out.txt"),
        {"cases.jsonl": jl(CASE), "out.txt": "x"}, 2, ("{d}/out.txt: the output folder is a file",)),
    Bad("score-out-under-a-file", ("score", "{d}/cases.jsonl", "--out", "{d}/out.txt/sub"),
        {"cases.jsonl": jl(CASE), "out.txt": "x"}, 2, ("{d}/out.txt/sub", "part of the path is a file")),
    Bad("score-out-read-only", ("score", "{d}/cases.jsonl", "--out", "{run}"), {"cases.jsonl": jl(CASE)}, 2,
        ("{d}/run", "read-only"), read_only=True),
    Bad("score-out-store-is-folder", ("score", "{d}/cases.jsonl", "--out", "{run}"), {"cases.jsonl": jl(CASE)}, 2,
        ("{d}/run/results.sqlite: is a folder",), setup=store_is_folder),
    api("store-api-parent-is-file", api_store_at("f.txt/results.sqlite"), "{d}/f.txt", "is a file",
        files={"f.txt": "x"}),
    api("store-api-path-is-folder", api_store_at("x"), "{d}/x: is a folder", setup=make_folder("x")),
    Bad("audit-export-to-folder", ("audit", "{run}", "--export", "{d}/sheets"), {}, 2,
        ("{d}/sheets: is a folder", "adjudication.csv"), setup=make_folder("sheets")),
    Bad("audit-export-under-a-file", ("audit", "{run}", "--export", "{d}/f.txt/sheet.csv"), {"f.txt": "x"}, 2,
        ("{d}/f.txt", "is a file, not a folder")),
    Bad("audit-export-read-only", ("audit", "{run}", "--export", "{d}/run/sheet.csv"), {}, 2,
        ("read-only",), read_only=True),
    Bad("report-md-is-a-folder", ("report", "{run}"), {}, 2, ("{d}/run/report.md: is a folder",),
        setup=output_is_folder("report.md")),
    Bad("reliability-json-is-a-folder", ("reliability", "{run}", "--bootstrap", "0"), {}, 2,
        ("{d}/run/reliability.json: is a folder",), setup=output_is_folder("reliability.json")),
    Bad("score-consensus-csv-is-a-folder", ("score", "{d}/cases.jsonl", "--out", "{run}"),
        {"cases.jsonl": jl(CASE)}, 2, ("{d}/run/consensus.csv: is a folder",),
        setup=output_is_folder("consensus.csv")),
    t2dt("text2dt-per-tree-to-folder", trees(TREE), trees(TREE), "is a folder", extra=("--per-tree", "{d}")),

    # ================================================================ metrics text2dt
    Bad("text2dt-pred-missing", ("metrics", "text2dt", "{d}/nope.json", "{d}/gold.json"), {"gold.json": trees(TREE)},
        2, ("cannot read {d}/nope.json",)),
    t2dt("text2dt-gold-not-json", trees(TREE), "[{", "{d}/gold.json", "not valid JSON"),
    t2dt("text2dt-pred-object", json.dumps({"tree": TREE}), trees(TREE), "expected a JSON list of trees"),
    t2dt("text2dt-jsonl-bad-line", jl(TREE, TREE, "[{"), jl(TREE, TREE, TREE), "{d}/pred.jsonl:3",
         "not valid JSON", pred_name="pred.jsonl", gold_name="gold.jsonl"),
    t2dt("text2dt-unknown-role", trees([{**D_LEAF, "role": "X"}]), trees(TREE), "prediction tree 0"),
    t2dt("text2dt-gold-empty-tree", trees(TREE), trees([]), "gold tree", "empty"),
    t2dt("text2dt-count-mismatch", trees(TREE, TREE), trees(TREE), "2 predictions but 1 gold trees"),
    t2dt("text2dt-unknown-id", trees({"id": "x", "tree": TREE}), trees({"id": "a", "tree": TREE}),
         "not in the gold file", "'x'"),
    t2dt("text2dt-duplicate-id", trees({"id": "a", "tree": TREE}, {"id": "a", "tree": TREE}),
         trees({"id": "a", "tree": TREE}, {"id": "b", "tree": TREE}), "duplicate id 'a'"),
    t2dt("text2dt-non-utf8", trees(TREE).encode() + b"\xff", trees(TREE), "{d}/pred.json: not UTF-8", "byte"),
    t2dt("text2dt-entry-without-tree", trees({"id": "a", "text": "x"}), trees({"id": "a", "tree": TREE}),
         "entry has no 'tree' field"),
    t2dt("text2dt-bad-triple", trees([{**D_LEAF, "triples": [["a", "b"]]}]), trees(TREE), "not three strings"),
    Bad("text2dt-pred-is-folder", ("metrics", "text2dt", "{d}/p", "{d}/gold.json"), {"gold.json": trees(TREE)}, 2,
        ("cannot read {d}/p: it is a folder",), setup=make_folder("p")),
    t2dt("text2dt-on-invalid-bogus", trees(TREE), trees(TREE), "Invalid value", extra=("--on-invalid", "skip")),
    t2dt("text2dt-ok-bom", "\ufeff" + trees(TREE), trees(TREE), '"tree_accuracy": 1.0', exit=0, extra=("--json",)),
    t2dt("text2dt-zero-invalid-counts-as-wrong-tree", trees(TREE, [{**D_LEAF, "role": "X"}]), trees(TREE, TREE),
         '"tree_accuracy": 0.5', '"invalid_predictions": 1', exit=0, extra=("--on-invalid", "zero", "--json")),

    # ================================================================ metrics tcm
    tcm_files("tcm-tongue-given-face-files", "tongue", "face", "field 'features': none of the keys task 'tongue'",
              "face_color"),
    tcm_files("tcm-sound-given-face-files", "sound", "face", "none of the keys task 'sound' scores"),
    tcm_files("tcm-pulse-given-tongue-files", "pulse", "tongue", "none of the keys task 'pulse' scores"),
    tcm_files("tcm-sound-given-pulse-files", "sound", "pulse", "none of the keys task 'sound' scores"),
    tcm_files("tcm-face-given-tongue-files", "face", "tongue", "is a tongue feature", "task 'tongue'"),
    tcm_files("tcm-face-given-pulse-files", "face", "pulse", "is a pulse feature"),
    tcm_files("tcm-face-given-prescription-files", "face", "prescription", "no line has the field 'syndromes'"),
    tcm_files("tcm-syndrome-given-prescription-files", "syndrome", "prescription",
              "no line has the field 'syndromes'"),
    tcm_files("tcm-dosage-given-face-files", "dosage", "face", "nothing to score for task 'dosage'"),
    tcm_files("tcm-inquiry-given-tongue-files", "inquiry", "tongue", "nothing to score for task 'inquiry'"),
    Bad("tcm-file-missing", ("metrics", "tcm", "tongue", "{d}/nope.jsonl", "{d}/gold.jsonl"),
        {"gold.jsonl": jl({"id": 1})}, 2, ("{d}/nope.jsonl: cases file not found",)),
    tcm("tcm-bad-json-line", "agreement", jl({"id": 1, "diagnoses": ["a"]}, "{x"), jl({"id": 1, "diagnoses": ["a"]}),
        "{d}/pred.jsonl:2: not valid JSON"),
    tcm("tcm-line-not-object", "agreement", jl([1]), jl({"id": 1, "diagnoses": ["a"]}),
        "{d}/pred.jsonl:1: expected a JSON object"),
    tcm("tcm-missing-id", "agreement", jl({"diagnoses": ["a"]}), jl({"id": 1, "diagnoses": ["a"]}),
        "{d}/pred.jsonl:1: field 'id' is missing"),
    tcm("tcm-duplicate-id", "agreement", jl({"id": 1, "diagnoses": []}, {"id": 1, "diagnoses": []}),
        jl({"id": 1, "diagnoses": ["a"]}), "{d}/pred.jsonl:2: field 'id': duplicate id '1'"),
    tcm("tcm-empty-file", "agreement", "", jl({"id": 1, "diagnoses": ["a"]}), "{d}/pred.jsonl: no cases"),
    tcm("tcm-ids-unmatched", "agreement", jl({"id": 2, "diagnoses": ["a"]}), jl({"id": 1, "diagnoses": ["a"]}),
        "{d}/pred.jsonl: no line with field 'id'"),
    tcm("tcm-features-wrong-type", "tongue", jl({"id": 1, "features": ["淡红"]}),
        jl({"id": 1, "features": {"tongue_color": "淡红"}}), "{d}/pred.jsonl:1: field 'features'"),
    tcm("tcm-typo-feature-key", "tongue", jl({"id": 1, "features": {"tongue_colour": "淡红"}}),
        jl({"id": 1, "features": {"tongue_colour": "淡红"}}), "{d}/gold.jsonl:1: field 'features'", "tongue_colour"),
    tcm("tcm-negative-dose", "dosage", jl({"id": 1, "dosages": {"黄芪": -3}}), jl({"id": 1, "dosages": {"黄芪": 10}}),
        "{d}/pred.jsonl:1: field 'dosages'"),
    tcm("tcm-tolerance-out-of-range", "dosage", jl({"id": 1, "dosages": {"黄芪": 3}}),
        jl({"id": 1, "dosages": {"黄芪": 10}}), "--tolerance must be in [0, 1)", extra=("--tolerance", "1.5")),
    tcm("tcm-aspects-empty", "tongue", jl({"id": 1, "description": "舌红"}), jl({"id": 1, "syndromes": ["x"]}),
        "--aspects is empty", extra=("--aspects", " , ")),
    tcm("tcm-non-utf8", "agreement", b'{"id": 1, "diagnoses": ["\xff"]}\n', jl({"id": 1, "diagnoses": ["a"]}),
        "{d}/pred.jsonl:1: not UTF-8 (byte 25"),
    Bad("tcm-knowledge-unknown-key", ("metrics", "tcm", "face", "{d}/pred.jsonl", "{d}/gold.jsonl", "--knowledge",
                                      "{d}/k.json"),
        {"pred.jsonl": jl({"id": 1, "syndromes": ["a"]}), "gold.jsonl": jl({"id": 1, "syndromes": ["a"]}),
         "k.json": json.dumps({"maps": {}})}, 2, ("{d}/k.json: unknown key 'maps'",)),
    Bad("tcm-knowledge-not-json", ("metrics", "tcm", "face", "{d}/pred.jsonl", "{d}/gold.jsonl", "--knowledge",
                                   "{d}/k.json"),
        {"pred.jsonl": jl({"id": 1, "syndromes": ["a"]}), "gold.jsonl": jl({"id": 1, "syndromes": ["a"]}),
         "k.json": "{nope"}, 2, ("{d}/k.json:1: not valid JSON",)),
    tcm("tcm-unknown-task", "tonuge", jl({"id": 1}), jl({"id": 1}), "Invalid value"),

    # ================================================================ command line (options owned by cli.py)
    Bad("cli-unknown-option", ("score", "{d}/cases.jsonl", "--frobnicate"), {"cases.jsonl": jl(CASE)}, 2,
        ("No such option",)),
    # a case over the rules judge's maximum size (1,000,000 characters): its calls fail, the run goes on
    Bad("cli-failed-calls-exit-3", ("score", "{d}/cases.jsonl", "--out", "{d}/out"),
        {"cases.jsonl": jl(case(id="huge", record="主诉：" + "口渴" * 500_001), case(id="c2"))}, 3, ("huge",)),
    # within --allow-failures, but the huge case has no verdict: exit 3 all the same
    Bad("cli-allow-failures-half", ("score", "{d}/cases.jsonl", "--out", "{d}/out", "--allow-failures", "0.5",
                                    "--lang", "en"),
        {"cases.jsonl": jl(case(id="huge", record="主诉：" + "口渴" * 500_001), case(id="c2"))}, 3,
        ("huge", "without a verdict")),
    Bad("cli-allow-failures-above-one", ("score", "{d}/cases.jsonl", "--out", "{d}/out", "--allow-failures", "2"),
        {"cases.jsonl": jl(case())}, 2, ("--allow-failures",)),
    Bad("cli-human-bootstrap-negative", ("reliability", "{run}", "--bootstrap", "-5"), {}, 2, ("--bootstrap",)),

    # ================================================================ textio.read_text itself
    api("textio-utf8-bom", api_read_text(expect="a,b\n"), exit=0, files={"f.txt": "\ufeffa,b\n".encode()}),
    api("textio-gbk", api_read_text(expect="病例,医生\n"), exit=0, files={"f.txt": "病例,医生\n".encode("gbk")}),
    api("textio-utf16", api_read_text(expect="a\tb\n"), exit=0, files={"f.txt": "a\tb\n".encode("utf-16")}),
    api("textio-explicit-encoding-bom", api_read_text("utf-8", expect="x"), exit=0,
        files={"f.txt": "\ufeffx".encode()}),
    api("textio-neither", api_read_text(), "{d}/f.txt: test file is neither UTF-8 nor GB18030/GBK text",
        "line 2, byte 5 (0x80)", "--encoding", files={"f.txt": b"ok\nab\x80\xff\n"}),
    api("textio-explicit-wrong", api_read_text("utf-8"), "{d}/f.txt: test file is not utf-8 text: line 1, byte 0",
        files={"f.txt": "病".encode("gbk")}),
    api("textio-unknown-encoding", api_read_text("klingon"), "unknown encoding 'klingon'", files={"f.txt": "x"}),
    api("textio-missing", api_read_text(), "{d}/f.txt: test file not found"),
]


def _export_sheet(d: Path) -> None:
    """The adjudication sheet `audit --export` writes (UTF-8 with a BOM), next to the run."""
    res = CliRunner().invoke(app, ["audit", str(d / "run"), "--export", str(d / "sheet.csv")])
    assert res.exit_code == 0, res.output
    assert (d / "sheet.csv").read_bytes().startswith(b"\xef\xbb\xbf")


def _params() -> list[Any]:
    dup = sorted(duplicates(b.name for b in CORPUS))
    assert not dup, f"duplicate corpus names: {dup}"
    return [pytest.param(b, id=b.name, marks=[pytest.mark.xfail(strict=True, reason=b.xfail)] if b.xfail else [])
            for b in CORPUS]


# --------------------------------------------------------------------------- running an entry


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small finished run (4 example cases, the rules judge), scored once for the whole module."""
    return scored_run_in(tmp_path_factory.mktemp("corpus-run"))


@pytest.mark.parametrize("bad", _params())
def test_bad_input(bad: Bad, tmp_path: Path, scored_run: Path) -> None:
    assert_passes(bad, tmp_path, scored_run)


def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 150


# --------------------------------------------------------------------------- fixes checked beyond a message


def test_two_judges_with_different_names_are_two_judges(tmp_path: Path) -> None:
    """Section 10: the same kind and settings under two names: both are called, stored and reported."""
    cfg = tmp_path / "two.yaml"
    cfg.write_text("judges:\n  - {name: a, kind: rules}\n  - {name: b, kind: rules}\n", encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")
    res = CliRunner().invoke(app, ["score", str(cases), "-c", str(cfg), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    from consensus_eval.execution.store import Store

    with Store.open_existing(tmp_path / "out", read_only=True) as store:
        rows = store.calls()
    assert {r.judge for r in rows} == {"a", "b"} and len(rows) == 3 * 3 * 2
    assert len({r.request_hash for r in rows}) == len(rows)
    cons = [json.loads(x) for x in (tmp_path / "out" / "consensus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [c["n_judges"] for c in cons] == [2, 2, 2]
    judged = [json.loads(x) for x in (tmp_path / "out" / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted({j["judge"] for j in judged}) == ["a", "b"]


def test_judge_identity_includes_the_name_for_every_kind() -> None:
    from consensus_eval.domain.config import JudgeConfig

    def identity(**kw: Any) -> str:
        return JudgeConfig.model_validate(kw).identity

    llm = {"model": "openai/gpt-4.1", "api_base": "http://judge.test/v1"}
    assert identity(name="a", **llm) != identity(name="b", **llm)
    assert identity(name="a", kind="rules") != identity(name="b", kind="rules")
    assert identity(name="a", kind="rules") == identity(name="a", kind="rules", concurrency=3)


def test_a_repeated_fixed_penalty_is_listed_once_as_charged() -> None:
    """Section 9: judgments.jsonl re-derives: what is listed is what was charged."""
    from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.domain.scoring import derive
    from consensus_eval.execution.store import CallRecord
    from consensus_eval.output.files import judgment_row
    from tests.helpers import as_stored

    rubric = load_rubric("medical_record")
    dim = next(d for d in rubric.dimensions if of_kind(d, Deductions).fixed_penalties)
    pen = of_kind(dim, Deductions).fixed_penalties[0]
    cat = of_kind(dim, Deductions).categories[0]
    typ = cat.types[0]
    points = typ.low
    judgment = Judgment(dimension=dim.id, deductions=[Deduction(category=cat.id, type=typ.id, points=points)] * 2,
                        fixed_penalties=[PenaltyHit(id=pen.id, evidence=f"quote {i}") for i in range(3)])
    rec = as_stored([CallRecord(status="ok", judgment=judgment, request_hash="h", case_id="c", dimension=dim.id,
                                judge="j", run=0)])[0]
    score = derive(dim, judgment)
    row = judgment_row(rubric, rec, score)
    assert [(p["id"], p["times_listed"], p["evidence"]) for p in row["fixed_penalties"]] == [(pen.id, 3, "quote 0")]
    # a reader re-derives the score from the line alone (caps from the rubric)
    per_cat: dict[str, float] = {}
    for d in row["deductions"]:
        per_cat[d["category_id"]] = per_cat.get(d["category_id"], 0) + d["points"]
    caps = {c.id: c.cap for c in of_kind(dim, Deductions).categories}
    rederived = max(0.0, dim.max - sum(min(v, caps[k]) for k, v in per_cat.items())
                    - sum(p["points"] for p in row["fixed_penalties"]))
    assert rederived == row["score"] == dim.max - 2 * points - pen.points


@pytest.mark.parametrize(("cell", "written"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+SUM(A1)", "'+SUM(A1)"), ("-cmd|x", "'-cmd|x"),
    ("@SUM(1)", "'@SUM(1)"), ("\tx", "'\tx"), ("\rx", "'\rx"), ("-3.5", "-3.5"), ("+2", "+2"), ("-1e-3", "-1e-3"),
    ("case-01", "case-01"), ("", ""), ("-", "'-"), ("=", "'="),
])
def test_csv_cell_neutralises_formulas(cell: str, written: str) -> None:
    from consensus_eval.output.files import csv_cell

    assert csv_cell(cell) == written
    assert csv_cell(-3.5) == -3.5 and csv_cell(7) == 7


def test_csv_outputs_are_safe_in_a_spreadsheet(tmp_path: Path) -> None:
    """Section 7: case ids starting with = + - @ are written with a leading ' in every CSV; numbers stay."""
    ids = ["=1+1", "+SUM(A1)", "-cmd", "@x", "-3.5"]
    cases = tmp_path / "cases.jsonl"
    cases.write_text(jl(*(case(id=i) for i in ids)), encoding="utf-8")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", str(cases), "--out", str(out)])
    assert res.exit_code == 0, res.output
    with (out / "consensus.csv").open(encoding="utf-8", newline="") as f:
        written = [r["case_id"] for r in csv.DictReader(f)]
    assert written == ["'=1+1", "'+SUM(A1)", "'-cmd", "'@x", "-3.5"]
    res = CliRunner().invoke(app, ["audit", str(out), "--top", "0", "--export", str(tmp_path / "sheet.csv")])
    assert res.exit_code == 0, res.output
    sheet = list(csv.DictReader(io.StringIO((tmp_path / "sheet.csv").read_text(encoding="utf-8-sig"))))
    assert {r["case_id"] for r in sheet} == {"'=1+1", "'+SUM(A1)", "'-cmd", "'@x", "-3.5"}
    for row in sheet:
        for key, value in row.items():
            assert not value.startswith(("=", "+", "@", "\t", "\r")), (key, value)
            assert not value.startswith("-") or value.lstrip("-").replace(".", "", 1).isdigit(), (key, value)
    # the JSON outputs keep the ids as they are
    assert [json.loads(x)["case_id"] for x in (out / "consensus.jsonl").read_text(encoding="utf-8").splitlines()] == ids


def test_read_only_open_writes_nothing(tmp_path: Path, scored_run: Path) -> None:
    """A read-only open leaves the store file byte for byte as it was (no pragma, no meta, no upgrade)."""
    from consensus_eval.execution.store import Store

    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    before = (run / "results.sqlite").read_bytes()
    names = sorted(p.name for p in run.iterdir())
    with Store.open_existing(run, read_only=True) as store:
        assert store.calls() and store.get_meta("config")
        with pytest.raises(RuntimeError, match="read-only"):
            store.set_meta("x", 1)
    assert (run / "results.sqlite").read_bytes() == before
    assert sorted(p.name for p in run.iterdir()) == names


def test_a_version_1_store_is_read_read_only_without_upgrading_it(tmp_path: Path, scored_run: Path) -> None:
    """A store of schema 1 (no calls.error_kind) opened read-only is read through an upgraded copy in memory, and
    left as it is."""
    from consensus_eval.execution.store import Store

    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    con = sqlite3.connect(run / "results.sqlite")
    con.execute("ALTER TABLE calls DROP COLUMN error_kind")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.execute("PRAGMA user_version = 0")        # as a store before schema 8: its version in meta only
    con.commit()
    con.close()
    before = (run / "results.sqlite").read_bytes()
    with Store.open_existing(run, read_only=True) as store:
        rows = store.calls()
    assert rows and all(r.error_kind is None for r in rows)
    assert (run / "results.sqlite").read_bytes() == before
    with Store.open_existing(run) as store:  # opened for writing, it is upgraded in place
        assert store.get_meta("schema_version") == SCHEMA_VERSION and store.calls()
