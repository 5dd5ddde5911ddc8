"""compare RUN_A RUN_B --against-clinicians: the paired change of each judge's and the
panel's agreement with the same clinicians on the spot check's held-out part, with paired bootstrap intervals over
the cases, a --fail-if gate and a count of the looks the held-out part has had.

The statistics are checked against independent sources (ICC(A,1): validity.icc_a1 and pingouin's ICC2; kappa and
macro-F1: scikit-learn with sample weights); the loop end to end through the command line with the fake server's
prompt-sensitive judge (tests/fake_server.py: a judge that misses value_error unless the prompt names it)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score
from typer.testing import CliRunner

from consensus_eval._errors import InputError
from consensus_eval.analysis.heldout import LOOKS_WARN, parse_conditions
from consensus_eval.analysis.paired_boot import (
    expanded_tail,
    icc_a1_batch,
    multiplicities,
    score_changes,
    verdict_batch,
)
from consensus_eval.analysis.validity import icc_a1
from consensus_eval.cli import app
from consensus_eval.execution.store import HeldoutLook, Store
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import spot_parts, write_cases
from tests.test_fake_judges import _prompts_naming

N_CASES = 40
DIMS = ("accuracy", "completeness", "standardization")


# --------------------------------------------------------------------------- the statistics against their oracles


def test_the_batched_icc_is_icc_a1_and_pingouins_icc2_and_weights_repeat_cases() -> None:
    pd = pytest.importorskip("pandas")
    pingouin = pytest.importorskip("pingouin")
    rng = np.random.default_rng(5)
    for n in (3, 10, 40):
        human = rng.normal(70, 10, n)
        rater = human + 3 + rng.normal(0, 5, n)
        got = float(icc_a1_batch(rater, human))
        assert got == pytest.approx(icc_a1(np.column_stack([rater, human])).value, abs=1e-12)
        long = pd.DataFrame({"case": np.tile(np.arange(n), 2), "rater": np.repeat(["j", "h"], n),
                             "score": np.concatenate([rater, human])})
        icc2 = pingouin.intraclass_corr(long, targets="case", raters="rater", ratings="score").set_index("Type")
        row = icc2.loc["ICC(A,1)"] if "ICC(A,1)" in icc2.index else icc2.loc["ICC2"]
        assert got == pytest.approx(float(row["ICC"]), abs=1e-9)
        # a case counted w times is the case repeated w times
        w = rng.integers(0, 4, n).astype(float)
        w[0] = max(w[0], 1)
        w[1] = max(w[1], 1)
        rep = np.repeat(np.arange(n), w.astype(int))
        assert float(icc_a1_batch(rater, human, w)) == pytest.approx(
            icc_a1(np.column_stack([rater[rep], human[rep]])).value, abs=1e-9)
    assert np.isnan(icc_a1_batch(np.array([1.0]), np.array([2.0])))           # one case: undefined


def test_the_batched_kappa_and_macro_f1_are_scikit_learns_with_sample_weights() -> None:
    rng = np.random.default_rng(7)
    ref = rng.random(60) < 0.4
    rater = np.where(ref, rng.random(60) < 0.7, rng.random(60) < 0.2)
    w = rng.integers(0, 3, (5, 60)).astype(float)
    kappa, f1 = verdict_batch(rater, ref, w)
    for i in range(5):
        y_true, y_pred = ref.astype(str), rater.astype(str)
        assert kappa[i] == pytest.approx(cohen_kappa_score(y_true, y_pred, sample_weight=w[i]), abs=1e-12)
        assert f1[i] == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0.0,
                                               sample_weight=w[i]), abs=1e-12)
    # one label throughout on both sides: kappa undefined; F1 of the one label present
    k, f = verdict_batch(np.zeros(4, bool), np.zeros(4, bool), np.ones((1, 4)))
    assert np.isnan(k[0]) and f[0] == pytest.approx(1.0)


def test_the_expanded_percentile_tail_and_no_interval_below_the_minimum() -> None:
    assert expanded_tail(10) == pytest.approx(0.0086, abs=2e-4)
    assert expanded_tail(40) == pytest.approx(0.0203, abs=2e-4)
    rng = np.random.default_rng(1)
    human = rng.normal(70, 10, 6)
    got = score_changes(human + 1, human + rng.normal(0, 2, 6), human, multiplicities(6, 200, 0))
    assert got["icc"].diff is not None and got["icc"].low is None and got["icc"].why == "few_cases"
    same = score_changes(human + 1, human + 1, human, multiplicities(6, 200, 0))
    assert same["mae"].diff == 0.0


def test_a_fail_if_condition_names_what_it_does_not_know() -> None:
    keys, raters = ["accuracy", "total"], ["blind", "panel"]
    c = parse_conditions(["icc.total < -0.05, blind:mae.accuracy.low > 0"], keys, raters)
    assert [(x.rater, x.metric, x.key, x.bound, x.op, x.value) for x in c] == [
        ("panel", "icc", "total", "mean", "<", -0.05), ("blind", "mae", "accuracy", "low", ">", 0.0)]
    assert [(c.metric, c.key) for c in parse_conditions(["blind:f1.items < 0", "kappa.items.low < -0.1"], keys,
                                                        raters)] == [("f1", "items"), ("kappa", "items")]
    for bad, said in (("kappa.total < 0", "kappa.items"),
                      ("icc.overall < 0", "no key 'overall'"), ("nobody:icc.total < 0", "no rater 'nobody'"),
                      ("total < -1", "METRIC.KEY"), ("", "an empty condition")):
        with pytest.raises(InputError, match=said):
            parse_conditions([bad], keys, raters)


# --------------------------------------------------------------------------- the loop through the command line


def _replies(cases: list[dict[str, Any]]) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, dict[str, float]]]:
    """Scripted replies of the judge ``fake-blind`` (every dimension of every case) and the clinicians' scores: each
    case has 0 to 3 value errors and 0 to 2 dose errors (2 points each) in accuracy, quoted from its record; the
    clinicians score accuracy 40 minus both, give or take half a point; the other dimensions' scores vary by case."""
    rng = random.Random(36)
    replies, clinicians = {}, {}
    for c in cases:
        quote = c["record"][:6]
        values, doses = rng.randint(0, 3), rng.randint(0, 2)
        ded = ([{"category": "numbers", "type": "value_error", "points": 2, "evidence": quote, "reason": "数值不符"}]
               * values + [{"category": "drugs", "type": "dose_error", "points": 2, "evidence": quote,
                            "reason": "剂量不符"}] * doses)
        comp, std = rng.randint(0, 3), rng.randint(0, 2)
        replies[f"fake-blind|{c['id']}"] = {
            "accuracy": {"deductions": ded, "fixed_penalties": [], "score": 40 - 2 * (values + doses), "stars": 3,
                         "comment": "c"},
            "completeness": {"deductions": [{"category": "present_illness", "type": "pi_recent_missing",
                                             "points": 4, "evidence": quote, "reason": "r"}] * comp,
                             "fixed_penalties": [], "score": 35 - 4 * comp, "stars": 3, "comment": "c"},
            "standardization": {"deductions": [{"category": "terminology", "type": "colloquial", "points": 1,
                                                "evidence": quote, "reason": "r"}] * std,
                                "fixed_penalties": [], "score": 25 - std, "stars": 4, "comment": "c"}}
        clinicians[c["id"]] = {"accuracy": min(40.0, 40 - 2 * (values + doses) + rng.choice([-0.5, 0, 0.5])),
                               "completeness": 35 - 4 * comp, "standardization": 25 - std}
    return replies, clinicians


def _config(path: Path, url: str, prompts: Path | None = None) -> Path:
    path.write_text(
        "rubric: medical_record\nruns: 1\nimportant_runs: 1\n"
        + (f"prompts_dir: {prompts}\n" if prompts else "")
        + f"judges:\n  - name: blind\n    model: openai/fake-blind\n    api_base: {url}/v1\n    mode: json\n"
          "    api_key_env: FAKE_KEY\n    max_retries: 0\n    max_reasks: 0\n", encoding="utf-8")
    return path


def _cli(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "FAKE_KEY": "sk-test-0123456789"})
    assert res.exit_code == code, res.output
    return res.output


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """v1 (misses value_error), v1 again, v2 (names it): the same 40 cases; A = v1 has a spot check of all 40 (20
    tuning, 20 held out) scored by a clinician; the labels copied to the other two."""
    tmp = tmp_path_factory.mktemp("heldout")
    cases_path = write_cases(tmp / "cases.jsonl", N_CASES)
    cases = [json.loads(x) for x in cases_path.read_text(encoding="utf-8").splitlines()]
    replies, clinicians = _replies(cases)
    sheet = tmp / "clinicians.csv"
    sheet.write_text("case_id," + ",".join(DIMS) + "\n" + "".join(
        f"{cid}," + ",".join(f"{s[d]:g}" for d in DIMS) + "\n" for cid, s in clinicians.items()), encoding="utf-8")
    runs = {"v1": tmp / "v1", "v1-again": tmp / "v1-again", "v2": tmp / "v2"}
    cfg = FakeConfig(seed=36, replies=replies, misses={"fake-blind": ["value_error"]}, fault_free_after=1)
    with FakeServer(cfg) as srv:
        v1 = _config(tmp / "v1.yaml", srv.url)
        v2 = _config(tmp / "v2.yaml", srv.url, _prompts_naming(tmp, "value_error"))
        for name, config in (("v1", v1), ("v1-again", v1), ("v2", v2)):
            _cli("score", str(cases_path), "--config", str(config), "--out", str(runs[name]))
    _cli("audit", str(runs["v1"]), "--spot-check", str(N_CASES), "--seed", "3")
    _cli("human", "import", str(sheet), "--run", str(runs["v1"]), "--reviewer", "dr_li", "--bootstrap", "0")
    _cli("human", "import", str(_verdict_sheet(tmp, runs["v1"], replies)), "--run", str(runs["v1"]), "--reviewer",
         "dr_li", "--bootstrap", "0")
    for name in ("v1-again", "v2"):
        _cli("human", "copy", str(runs["v1"]), str(runs[name]), "--bootstrap", "0")
    return runs


def _verdict_sheet(tmp: Path, run: Path, replies: dict[str, dict[str, dict[str, Any]]]) -> Path:
    """The clinician's second round on v1: every value_error the judge's script has, added (v1 missed them all);
    each dose_error of v1 agreed with on the cases of even number, disagreed with on the others."""
    rows = ["row,case_id,dimension,deduction_id,human_verdict,type,evidence"]
    for x in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        j = json.loads(x)
        for i, d in enumerate(j["deductions"]):
            if d["type_id"] == "dose_error":
                verdict = "agree" if int(j["case_id"].rsplit("-", 1)[1]) % 2 == 0 else "disagree"
                rows.append(f"deduction,{j['case_id']},accuracy,{j['request_hash']}#d{i},{verdict},,")
    for key, reply in replies.items():
        cid = key.split("|", 1)[1]
        rows += [f"added,{cid},accuracy,,,value_error,{d['evidence']}" for d in reply["accuracy"]["deductions"]
                 if d["type"] == "value_error"][:1]
    path = tmp / "verdicts.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _items(run: Path, held: set[str]) -> dict[tuple[str, str], bool]:
    """(case, type) -> whether the judge took it, for the held-out cases' accuracy deductions of ``run``."""
    took: dict[tuple[str, str], bool] = {}
    for x in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        j = json.loads(x)
        if j["case_id"] in held and j["dimension"] == "accuracy":
            for d in j["deductions"]:
                took[(j["case_id"], d["type_id"])] = True
    return took


def _json(*args: str, code: int = 0) -> dict[str, Any]:
    out = _cli("compare", *args, "--against-clinicians", "--json", code=code)
    return dict(json.loads(out[:out.rindex("}") + 1]))


def test_prompt_v2_shows_a_held_out_icc_gain_whose_interval_excludes_0(loop: dict[str, Path]) -> None:
    got = _json(str(loop["v1"]), str(loop["v2"]))
    assert got["heldout"] == 20 and got["labelled"] == 20 and got["looks"] == 1 and not got["warn"]
    for rater in ("blind", "panel"):
        icc = got["raters"][rater]["scores"]["total"]["icc"]
        assert icc["n"] == 20 and icc["diff"] > 0.1 and icc["low"] > 0, icc
        bias = got["raters"][rater]["scores"]["accuracy"]["bias"]
        assert bias["a"] > 1 and abs(bias["b"]) < 0.5 and bias["high"] < 0      # v1 too lenient: it missed them
    # the category v2 gained: value_error's (numbers), as many per held-out case as v2 listed (v1 listed none)
    held = {cid for cid, part in spot_parts(loop["v1"]).items() if part == "heldout"}
    listed = sum(d["type_id"] == "value_error" for x in (loop["v2"] / "judgments.jsonl").read_text(
        encoding="utf-8").splitlines() if (j := json.loads(x))["case_id"] in held for d in j["deductions"])
    gained = {c["key"]: c for c in got["categories"]}
    assert listed and gained["accuracy.numbers"]["count_a"] == 0
    assert gained["accuracy.numbers"]["count_diff"] == pytest.approx(listed / 20)
    assert "accuracy.drugs" not in gained or gained["accuracy.drugs"]["count_diff"] == 0
    # kappa and macro-F1 of the judge's deduction items against the clinicians', checked against scikit-learn
    cases = {json.loads(x)["case_id"]: json.loads(x) for x in (loop["v1"] / "judgments.jsonl").read_text(
        encoding="utf-8").splitlines() if json.loads(x)["dimension"] == "accuracy"}
    ref = {}
    for cid in held:
        types = {d["type_id"] for d in cases[cid]["deductions"]}
        if "dose_error" in types:
            ref[(cid, "dose_error")] = int(cid.rsplit("-", 1)[1]) % 2 == 0
    took_a, took_b = _items(loop["v1"], held), _items(loop["v2"], held)
    for cid, t in took_b:
        if t == "value_error":
            ref[(cid, t)] = True                       # the clinician added one wherever the script has one
    keys = sorted(ref)
    truth = [ref[k] for k in keys]
    verdicts = got["raters"]["blind"]["verdicts"]
    for side, took in (("a", took_a), ("b", took_b)):
        said = [took.get(k, False) for k in keys]
        assert verdicts["kappa"][side] == pytest.approx(cohen_kappa_score(truth, said))
        assert verdicts["f1"][side] == pytest.approx(f1_score(truth, said, average="macro"))
    assert verdicts["f1"]["n"] == len(keys) and verdicts["f1"]["diff"] > 0 and verdicts["kappa"]["diff"] > 0
    out = _cli("compare", str(loop["v2"]), str(loop["v1"]), "--against-clinicians", "--fail-if", "blind:f1.items < 0",
               "--lang", "en", code=5)
    assert "the change of blind's f1 on items" in " ".join(out.split())
    assert got["raters"]["panel"]["verdicts"] == {}
    text = _cli("compare", str(loop["v1"]), str(loop["v2"]), "--against-clinicians", "--lang", "en")
    assert "agreement with the clinicians, held out" in text and "20 of its 20 cases" in text
    assert "Looks at this held-out part so far: 1" in text


def test_v1_against_itself_shows_no_change_and_is_not_a_look(loop: dict[str, Path]) -> None:
    got = _json(str(loop["v1"]), str(loop["v1-again"]))
    assert got["look"] is None and got["looks"] == 1            # the v1-v2 look of the test before, not this one
    for fig in ("icc", "mae", "bias"):
        f = got["raters"]["panel"]["scores"]["total"][fig]
        assert f["diff"] == 0 and f["low"] == 0 and f["high"] == 0


def test_fail_if_gates_both_ways(loop: dict[str, Path]) -> None:
    out = _cli("compare", str(loop["v1"]), str(loop["v2"]), "--against-clinicians", "--fail-if",
               "icc.total < -0.05", "--lang", "en")
    assert "fail-if: no condition holds (icc.total < -0.05)" in out
    res = CliRunner().invoke(app, ["compare", str(loop["v2"]), str(loop["v1"]), "--against-clinicians",
                                   "--fail-if", "blind:icc.total < -0.05", "--lang", "en"], env={"COLUMNS": "200"})
    assert res.exit_code == 5, res.output
    assert "fail-if: blind:icc.total < -0.05: the change of blind's icc on total" in res.output
    # v2 against v1 is the same look as v1 against v2
    assert _json(str(loop["v2"]), str(loop["v1"]))["looks"] == 1


def test_past_the_looks_limit_the_comparison_warns(loop: dict[str, Path], tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(loop["v1"], a)
    shutil.copytree(loop["v2"], b)
    with Store.open_existing(a, read_only=True) as store:
        held = store.heldout_looks()[0].heldout
    with Store.open_existing(b) as store:   # three other versions compared on the same held-out part before
        store.add_heldout_looks([HeldoutLook(look_id=f"x{i}", heldout=held, version_a="v", version_b=f"w{i}",
                                             run_a="r", run_b="s", at=float(i)) for i in range(LOOKS_WARN)])
        store.add_heldout_looks([HeldoutLook(look_id="other", heldout="another-part", version_a="v", version_b="w",
                                             run_a="r", run_b="s", at=1.0)])
    got = _json(str(a), str(b))
    assert got["looks"] == LOOKS_WARN + 1 and got["warn"]
    text = _cli("compare", str(a), str(b), "--against-clinicians", "--lang", "zh")
    assert f"该保留集已用于 {LOOKS_WARN + 1} 次比较" in text


def test_runs_without_the_same_spot_check_and_labels_are_refused(loop: dict[str, Path], tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(loop["v2"], bare)
    (bare / "results.sqlite").unlink()
    shutil.copy(loop["v2"] / "results.sqlite", bare / "results.sqlite")
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(bare / "results.sqlite")) as con, con:
        con.execute("DELETE FROM spot_checks")
    out = _cli("compare", str(loop["v1"]), str(bare), "--against-clinicians", code=2)
    assert f"human copy {loop['v1']} {bare}" in " ".join(out.split())


def test_the_paired_interval_covers_a_null_change_about_95_percent_at_10_cases() -> None:
    """The small-sample claim behind MIN_CASES, cheaply (bench/heldout_coverage_sim.py measures it in full): two
    versions of one judge, independent noise around the same bias, 10 held-out cases; the true change of ICC, MAE
    and bias is 0; 300 studies of 1,000 resamples each cover it about 95% of the time (0.90 is four standard errors
    below)."""
    rng = np.random.default_rng(10)
    hits = dict.fromkeys(("icc", "mae", "bias"), 0)
    for _ in range(300):
        human = rng.normal(70, 10, 10)
        shared = rng.normal(0, 3, 10)
        a = human + 2 + shared + rng.normal(0, 4, 10)
        b = human + 2 + shared + rng.normal(0, 4, 10)
        got = score_changes(a, b, human, multiplicities(10, 1000, int(rng.integers(2**31))))
        for f in hits:
            c = got[f]
            assert c.low is not None and c.high is not None, (f, c.why)
            hits[f] += c.low <= 0 <= c.high
    assert all(h / 300 >= 0.90 for h in hits.values()), hits
