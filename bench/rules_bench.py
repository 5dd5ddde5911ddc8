"""Benchmark: the rules judge's time per KB of record, from 1 KB to 5 MB.

Each workload is one case built from the 16 example cases (``examples/cases.jsonl``), copied and
varied until the record reaches the size: copy ``i`` is example ``i % 16``; from the second round on,
every copy gets its own (seeded) variation, applied alike to its record and its conversation: decimal
numbers shifted, some integers changed, drugs swapped for others of the same class. Some copies are
then changed in the record only, so that the checks find something: a value that the conversation
does not give, a colloquial term, a vague time word, an affirmed diabetes in past history, a negation
dropped. The record is one structured record (主诉 of the first copy; then 现病史, 既往史, 家族史 and
个人史, each the concatenation of the copies' sections), so every section grows with the size; the
conversation is the concatenation of the copies' conversations and grows with it (about as long as
the record), unless ``--conversation fixed`` keeps it at about 2,000 characters.

Sizes are characters of the record (1 KB = 1,000 characters); s/KB is given per KB of record and per
KB of case (record and conversation together, what a judge's maximum case size counts). The record's
longest sections are cut at full stops until it is at most the size. Each run is
``consensus_eval.judges.rules.check_case(case, rubric)`` in a forked child process (the case is built
before), timed there with ``time.perf_counter``; a run that takes longer than ``--timeout`` seconds is
killed and reported as ``> T s`` (the size's later runs are skipped). The figure per size is the median
of its runs. One check of a 1 KB case (another seed) runs untimed first, in this process and again in
each child, so that what is compiled or imported on first use, and the pages the child copies on first
write, are not timed.

    python bench/rules_bench.py [--sizes 1e3,1e4,1e5,1e6,5e6] [--runs 5] [--large-runs 3] [--timeout 120]
                                [--conversation grown|fixed] [--seed 0] [--json F] [--profile SIZE]
    python bench/rules_bench.py --degenerate [--sizes 2e4,4e4]

``--runs`` applies to sizes up to 100 KB, ``--large-runs`` above. ``--profile SIZE`` runs cProfile on
one check of that size (in this process) and prints the top functions by cumulative and own time.
``--degenerate`` times texts no record should hold but a generator stuck in a loop may write (a run
of digits, a drug list with no clause end, a transcript without punctuation ...: ``DEGENERATE``), one
run per size, default 20 KB and 40 KB; linear code takes about twice as long at twice the size.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing as mp
import pstats
import random
import re
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from consensus_eval.domain.cases import Case, load_cases
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.judges.rules import check_case

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cases.jsonl"
SECTIONS = ("主诉", "现病史", "既往史", "家族史", "个人史")
_HEADING = re.compile(r"^(主诉|现病史|既往史|家族史|个人史)：", re.M)
#: drugs swapped within a class (the same swap in a copy's record and conversation)
SWAPS = (("二甲双胍", "二甲双胍"), ("格列美脲", "格列齐特"), ("格列齐特", "格列吡嗪"), ("阿卡波糖", "伏格列波糖"),
         ("西格列汀", "利格列汀"), ("达格列净", "恩格列净"), ("氨氯地平", "非洛地平"), ("缬沙坦", "厄贝沙坦"),
         ("厄贝沙坦", "氯沙坦"), ("阿托伐他汀", "瑞舒伐他汀"), ("瑞舒伐他汀", "辛伐他汀"), ("贝那普利", "依那普利"),
         ("硝苯地平", "非洛地平"))
_DRUG_RX = re.compile("|".join(sorted({a for a, _ in SWAPS}, key=len, reverse=True)))
_DECIMAL = re.compile(r"(?<![\d.])\d{1,2}\.\d(?![\d.])")
_INTEGER = re.compile(r"(?<![\d./])\d{2,3}(?![\d./])")
_COLLOQUIAL = (("多饮", "喝水多"), ("乏力", "没劲"), ("多尿", "尿多"), ("视物模糊", "看不清"))
_VAGUE = ("最近", "前段时间", "很久以前", "近期")


def _split(record: str) -> dict[str, str]:
    """A record's section bodies by heading (the example records are written one section a line)."""
    marks = list(_HEADING.finditer(record))
    out = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(record)
        out[m.group(1)] = record[m.end():end].strip()
    return out


def _vary_copy(record: str, conversation: str, rng: random.Random) -> tuple[str, str]:
    """One copy's variation, alike in its record and its conversation (see the module docstring)."""
    shift = rng.choice((0.1, 0.2, 0.3, 0.5, -0.1, -0.2))
    bump = rng.choice((0, 1, 2, 5, 10))
    swap = {a: b for a, b in SWAPS if rng.random() < 0.5}

    def vary(text: str) -> str:
        text = _DECIMAL.sub(lambda m: f"{max(0.1, float(m.group()) + shift):.1f}", text)
        if bump:
            text = _INTEGER.sub(lambda m: str(int(m.group()) + bump), text)
        return _DRUG_RX.sub(lambda m: swap.get(m.group(), m.group()), text)

    return vary(record), vary(conversation)


def _record_only_changes(sections: dict[str, str], rng: random.Random) -> dict[str, str]:
    """Changes in the record only, so the checks find something."""
    out = dict(sections)
    pi = out.get("现病史", "")
    if rng.random() < 0.25:  # a value the conversation does not give
        pi = _DECIMAL.sub(lambda m: f"{float(m.group()) + 1.3:.1f}", pi, count=1)
    if rng.random() < 0.2:
        std, coll = rng.choice(_COLLOQUIAL)
        pi = pi.replace(std, coll, 1)
    if rng.random() < 0.2:
        pi = pi.replace("近", rng.choice(_VAGUE), 1)
    out["现病史"] = pi
    ph = out.get("既往史", "")
    if ph and rng.random() < 0.1:
        ph = "2型糖尿病病史多年；" + ph
    if ph and rng.random() < 0.1:
        ph = ph.replace("否认", "有", 1)  # a negation dropped
    if ph:
        out["既往史"] = ph
    return out


def build_case(size: int, seed: int = 0, conversation: str = "grown") -> Case:
    """A case whose record has at most ``size`` characters (see the module docstring)."""
    roles = load_rubric("medical_record").roles
    examples = load_cases(EXAMPLES).cases
    bodies: dict[str, list[str]] = {name: [] for name in SECTIONS}
    convs: list[str] = []
    rec_len = conv_len = 0
    i = 0
    while rec_len < size or (conversation == "grown" and conv_len < size):
        ex = examples[i % len(examples)]
        rng = random.Random(seed * 1_000_003 + i)
        record, conv = ex.record, ex.conversation_as_text(roles)
        if i >= len(examples):
            record, conv = _vary_copy(record, conv, rng)
        sections = _split(record)
        if i >= len(examples):
            sections = _record_only_changes(sections, rng)
        for name in SECTIONS:
            if name in sections and (name != "主诉" or not bodies[name]):
                bodies[name].append(sections[name])
                rec_len += len(sections[name])
        if conversation == "grown" or conv_len < 2_000:
            convs.append(conv)
            conv_len += len(conv) + 1
        i += 1
    texts = {name: "".join(bodies[name]) for name in SECTIONS}
    over = sum(len(f"{name}：{texts[name]}") + 1 for name in SECTIONS) - 1 - size
    while over > 0:  # cut the longest section at an earlier full stop (the overshoot is one copy at most)
        name = max(SECTIONS[1:], key=lambda n: len(texts[n]))
        body = texts[name]
        cut = body.rfind("。", 0, len(body) - 1)
        cut = cut + 1 if cut > 0 else max(0, len(body) - over)
        over -= len(body) - cut
        texts[name] = body[:cut]
    record = "\n".join(f"{name}：{texts[name]}" for name in SECTIONS)
    text = "\n".join(convs)
    if conversation == "grown" and len(text) > size:  # cut at a line end
        cut = text.rfind("\n", 0, size)
        text = text[:cut] if cut > 0 else text[:size]
    return Case(id=f"bench-{size}", conversation=text, record=record)


#: degenerate texts (``--degenerate``): (name, where, unit repeated to the size)
DEGENERATE = (("digit run", "record", "1"), ("多 run", "record", "多"),
              ("drug names, no separator", "record", "二甲双胍"),
              ("drug list in one clause", "record", "二甲双胍片500mg、格列美脲、阿卡波糖、"),
              ("口渴 in one sentence", "record", "口渴，"),
              ("conversation without punctuation", "conversation",
               "我吃二甲双胍500毫克没吃过格列美脲我爸有高血压空腹血糖7点多"))


def degenerate_case(where: str, unit: str, size: int) -> Case:
    """A case whose record (or the patient's one turn) is ``unit`` repeated to ``size`` characters."""
    text = (unit * (size // len(unit) + 1))[:size]
    if where == "record":
        return Case(id=f"degenerate-{size}", record=f"主诉：血糖升高3年。\n现病史：{text}",
                    conversation="医生：您好\n患者：我糖尿病3年了，吃二甲双胍500毫克，一天两次。")
    return Case(id=f"degenerate-{size}", record="主诉：血糖升高3年。\n现病史：予二甲双胍片500mg 每日2次 口服。",
                conversation=f"医生：吃什么药\n患者：{text}")


def _child(case: Case, rubric: Rubric, conn: Connection, warm: Case | None = None) -> None:
    if warm is not None:  # untimed: the pages the check touches, copied on write after the fork
        check_case(warm, rubric)
    t0 = time.perf_counter()
    out = check_case(case, rubric)
    elapsed = time.perf_counter() - t0
    conn.send((elapsed, sum(len(j.deductions) + len(j.fixed_penalties) for j in out.values())))
    conn.close()


def timed_run(case: Case, rubric: Rubric, timeout: float, warm: Case | None = None) -> tuple[float | None, int | None]:
    """Seconds of one ``check_case`` in a forked child (after an untimed check of ``warm`` there), and its
    number of findings; (None, None) past the timeout."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(case, rubric, child, warm))
    proc.start()
    child.close()
    try:
        if parent.poll(timeout):
            elapsed, n = parent.recv()
            return elapsed, n
        return None, None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:g} MB" if n >= 1_000_000 else f"{n / 1e3:g} KB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", help="record sizes in characters (default 1e3,1e4,1e5,1e6,5e6)")
    ap.add_argument("--runs", type=int, default=5, help="runs per size up to 100 KB (median)")
    ap.add_argument("--large-runs", type=int, default=3, help="runs per size above 100 KB (median)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds after which a run is stopped")
    ap.add_argument("--conversation", choices=("grown", "fixed"), default="grown")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--profile", type=float, help="cProfile one check of this record size instead")
    ap.add_argument("--degenerate", action="store_true",
                    help="time degenerate texts instead (one run each; --sizes, default 2e4,4e4)")
    args = ap.parse_args(argv)
    rubric = load_rubric("medical_record")

    if args.profile:
        case = build_case(int(args.profile), args.seed, args.conversation)
        prof = cProfile.Profile()
        prof.enable()
        check_case(case, rubric)
        prof.disable()
        stats = pstats.Stats(prof, stream=sys.stdout)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(25)
        return 0

    if args.degenerate:
        return _degenerate(args, rubric)
    sizes = [int(float(s)) for s in (args.sizes or "1e3,1e4,1e5,1e6,5e6").split(",")]
    rows: list[dict[str, Any]] = []
    # warm-up before the children are forked (regular expressions compiled on first use, lazy imports),
    # and again in each child before its timed check
    warm = build_case(1_000, args.seed + 1, args.conversation)
    check_case(warm, rubric)
    print(f"conversation: {args.conversation}; timeout {args.timeout:g} s; python {sys.version.split()[0]}")
    print(f"{'size':>8} {'record':>9} {'conv':>9} {'runs':>5} {'median s':>10} {'s/KB rec':>9} {'s/KB case':>9} "
          f"{'findings':>8}  all runs")
    for size in sizes:
        case = build_case(size, args.seed, args.conversation)
        conv_chars = case.size - len(case.record)
        runs = args.runs if size <= 100_000 else args.large_runs
        times: list[float] = []
        findings = None
        timed_out = False
        for _ in range(runs):
            elapsed, n = timed_run(case, rubric, args.timeout, warm)
            if elapsed is None:
                timed_out = True
                break
            times.append(elapsed)
            findings = n
        kb, case_kb = len(case.record) / 1000, case.size / 1000
        if timed_out:
            med, shown = None, f"> {args.timeout:g}"
            per_kb, per_case_kb = f"> {args.timeout / kb:.4f}", f"> {args.timeout / case_kb:.4f}"
        else:
            med = statistics.median(times)
            shown, per_kb, per_case_kb = f"{med:.3f}", f"{med / kb:.5f}", f"{med / case_kb:.5f}"
        print(f"{_fmt_size(size):>8} {len(case.record):>9,} {conv_chars:>9,} {len(times):>5} {shown:>10} {per_kb:>9} "
              f"{per_case_kb:>9} {findings if findings is not None else '-':>8}  {' '.join(f'{t:.3f}' for t in times)}",
              flush=True)
        rows.append({"size": size, "record_chars": len(case.record), "conversation_chars": conv_chars,
                     "runs": times, "timed_out": timed_out, "median_s": med,
                     "s_per_kb": None if med is None else med / kb,
                     "s_per_kb_case": None if med is None else med / case_kb, "findings": findings})
    if args.json:
        args.json.write_text(json.dumps({"conversation": args.conversation, "timeout": args.timeout,
                                         "seed": args.seed, "rows": rows}, indent=1))
    return 0


def _degenerate(args: argparse.Namespace, rubric: Rubric) -> int:
    sizes = [int(float(s)) for s in (args.sizes or "2e4,4e4").split(",")]
    warm = build_case(1_000, args.seed + 1)
    check_case(warm, rubric)
    print(f"degenerate texts, one run each; timeout {args.timeout:g} s")
    print(f"{'text':>34} " + " ".join(f"{_fmt_size(n):>10}" for n in sizes) + "   last/first")
    rows = []
    for name, where, unit in DEGENERATE:
        times = [timed_run(degenerate_case(where, unit, n), rubric, args.timeout, warm)[0] for n in sizes]
        shown = [f"{t:.3f} s" if t is not None else f"> {args.timeout:g} s" for t in times]
        first, last = times[0], times[-1]
        ratio = f"{last / first:.1f}x" if first and last else "-"
        print(f"{name:>34} " + " ".join(f"{x:>10}" for x in shown) + f"   {ratio:>10}", flush=True)
        rows.append({"text": name, "where": where, "sizes": sizes, "seconds": times})
    if args.json:
        args.json.write_text(json.dumps({"degenerate": rows, "timeout": args.timeout}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
