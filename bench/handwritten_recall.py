"""Benchmark: the judges' recall on the held-out hand-written calibration set (issue 23).

The hand-written set (``consensus_eval/domain/calibration/handwritten.yaml``, loaded by
:func:`consensus_eval.domain.calibration.handwritten.handwritten_suite`) holds errors written freely by
a different hand than the built-in suite's operators, and clean paraphrased controls. This script
writes it as a suite file (JSONL), runs ``consensus-eval calibrate`` on it for the judges of CONFIG
(by default the offline rules judge only) and prints, per judge: planted errors found (k/n, with the
95% interval), type-matched and points-weighted recall, recall per type, false alarms per clean
control and the share of clean controls flagged, precision. With ``--synthetic`` it also runs the
built-in (operator-planted) suite into OUT/synthetic and prints its overall recall beside, so the two
figures can be read side by side. Nothing is changed in any judge; the set is never used to tune one.

    python bench/handwritten_recall.py [--config configs/default.yaml] [--out /tmp/hw] [--synthetic]
                                       [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from consensus_eval.domain.calibration.handwritten import handwritten_suite
from consensus_eval.domain.calibration.suite import dumps_suite
from consensus_eval.domain.rubric import load_rubric

ROOT = Path(__file__).resolve().parents[1]


def _cli() -> str:
    """The ``consensus-eval`` script of this interpreter's environment (else the one on PATH)."""
    beside = Path(sys.executable).with_name("consensus-eval")
    return str(beside) if beside.exists() else (shutil.which("consensus-eval") or "consensus-eval")


def calibrate(config: str, suite: str, out: Path) -> dict[str, Any]:
    """Run ``consensus-eval calibrate`` and return its calibration.json (exit codes 0 and 3 are results)."""
    cmd = [_cli(), "calibrate", "--config", config, "--suite", suite, "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 3):
        sys.exit(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    return data


def _share(p: dict[str, Any]) -> str:
    return f"{p['k']}/{p['n']} = {p['value']:.0%} [{p['low']:.0%}-{p['high']:.0%}]"


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """Per judge: the figures this benchmark reports, from a calibration.json."""
    out: dict[str, Any] = {}
    for name, j in data["judges"].items():
        out[name] = {
            "found": j["overall"]["found"],
            "type_match": j["overall"]["type_match"],
            "weighted": j["overall"]["weighted"],
            "unjudged": j["unjudged"],
            "clean_cases": j["clean_cases"],
            "false_alarms_per_case": j["false_alarms_per_case"],
            "clean_flagged": j["clean_flagged"],
            "precision": j["precision"],
            "by_type": {t: (r["found"]["k"], r["found"]["n"]) for t, r in sorted(j["by_type"].items())},
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/default.yaml")
    ap.add_argument("--out", default="/tmp/hw", type=Path)
    ap.add_argument("--synthetic", action="store_true", help="also run the built-in suite, for comparison")
    ap.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = ap.parse_args()

    import yaml

    config = yaml.safe_load((ROOT / args.config).read_text(encoding="utf-8"))
    rubric = load_rubric(config.get("rubric", "medical_record"))
    suite = handwritten_suite(rubric)
    args.out.mkdir(parents=True, exist_ok=True)
    suite_path = args.out / "handwritten.jsonl"
    suite_path.write_text(dumps_suite(suite), encoding="utf-8")
    planted = sum(len(c.expected) for c in suite)
    clean = sum(c.clean for c in suite)
    print(f"hand-written set: {len(suite)} cases, {planted} planted errors "
          f"({len({e.type for c in suite for e in c.expected})} types), {clean} clean controls")

    figures: dict[str, Any] = {"handwritten": summary(calibrate(args.config, str(suite_path), args.out / "run"))}
    if args.synthetic:
        figures["synthetic"] = summary(calibrate(args.config, "builtin", args.out / "synthetic"))

    for name, f in figures["handwritten"].items():
        print(f"\n== {name} on the hand-written set ==")
        print(f"found:        {_share(f['found'])}")
        print(f"type match:   {_share(f['type_match'])}")
        w = f["weighted"]
        print(f"points:       {w['found_points']:g}/{w['points']:g} = {w['value']:.0%}")
        print(f"unjudged:     {f['unjudged']}")
        print(f"clean:        {f['false_alarms_per_case']:.2f} false alarms per clean control; "
              f"flagged {_share(f['clean_flagged'])}")
        print(f"precision:    {_share(f['precision'])}")
        if "synthetic" in figures and name in figures["synthetic"]:
            print(f"synthetic:    found {_share(figures['synthetic'][name]['found'])} (built-in suite)")
        print("per type (found/planted):")
        for t, (k, n) in f["by_type"].items():
            print(f"  {t:30} {k}/{n}")
    if args.json:
        args.json.write_text(json.dumps(figures, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
