"""report.md: the report as Markdown tables, readable as plain text and in any Markdown viewer.

Text from cases and judges goes through :func:`md_text`: HTML special characters become entities
(so a Markdown viewer that renders inline HTML shows ``<script>`` as text) and Markdown syntax
characters are backslash-escaped, so a quote cannot break a table or inject a link.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from consensus_eval.analysis.agreement import Agreement
from consensus_eval.analysis.audit import CaseAudit, DimensionAudit
from consensus_eval.output.report import fmt
from consensus_eval.output.report.charts import summary_stats
from consensus_eval.output.report.data import MARKDOWN_TOP, ReportData

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md_text(s: object) -> str:
    """Any value as inline Markdown text: one line, HTML and Markdown syntax escaped."""
    text = " ".join(str(s).split())
    text = "".join(_HTML.get(ch, ch) for ch in text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """A Markdown table; cells must already be escaped text. ``right`` marks right-aligned columns."""
    right = right or [False] * len(header)
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(data: ReportData) -> str:
    """The whole report as Markdown."""
    parts = [
        _header(data), _summary(data), _distributions(data), _agreement(data), _reliability(data),
        _metrics(data), _human(data), _costs(data), _ranking(data),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def _header(d: ReportData) -> str:
    r = d.rubric
    text = (f"# {md_text(r.name)}\n\nconsensus-eval report · {len(d.consensus)} cases · {len(d.judges)} judge(s): "
            f"{md_text(', '.join(d.judges))} · rubric {md_text(r.id)} v{md_text(r.version)} · generated "
            f"{d.generated_at} from the store alone (no judge called). The HTML report (report.html) has "
            "every case's deductions, evidence and record.")
    if d.missing_calls:
        text += (f"\n\n**This run is incomplete: {d.missing_calls} of {d.planned_calls} planned calls are not stored "
                 f"yet, so {d.incomplete_cases} case(s) are incomplete and their scores are provisional.** Rerun the "
                 "same `consensus-eval score` command to resume.")
    return text


def _summary(d: ReportData) -> str:
    dims = d.rubric.dimensions
    header = ["case", *(f"{md_text(x.name)} /{fmt.num(x.max)}" for x in dims), f"total /{fmt.num(d.rubric.max_total)}",
              "star total", "stars", "judges", "spread", "status", "flags"]
    rows = [[md_text(c.case_id), *(fmt.num(c.scores[x.id]) for x in dims), fmt.num(c.total), fmt.num(c.star_total),
             "/".join(str(c.stars[x.id] or "-") for x in dims), str(c.n_judges), fmt.num(c.spread), c.status,
             md_text("; ".join(c.flags))] for c in d.consensus]
    right = [False, *([True] * (len(dims) + 5)), False, False]
    return "## Summary\n\n" + table(header, rows, right)


def _distributions(d: ReportData) -> str:
    rows = []
    for j, values in d.totals.items():
        if values:
            s = summary_stats(values)
            rows.append([md_text(j), str(len(values)), *(fmt.num(s[k]) for k in ("min", "q1", "median", "q3", "max")),
                         fmt.fixed(s["mean"])])
        else:
            rows.append([md_text(j), "0", *([fmt.DASH] * 6)])
    header = ["judge", "n", "min", "Q1", "median", "Q3", "max", "mean"]
    return ("## Score distributions per judge\n\nTotals of the cases each judge scored on every dimension.\n\n"
            + table(header, rows, [False] + [True] * 7))


def _agreement(d: ReportData) -> str:
    if len(d.judges) < 2:
        return "## Judge vs judge\n\nOne judge only: nothing to compare."
    rows = []
    for a in d.judges:
        cells = []
        for b in d.judges:
            p = d.agreement.get((a, b))
            cells.append(fmt.DASH if p is None else f"{fmt.fixed(p.mad)} / {fmt.fixed(p.alpha.value, 3)} (n={p.n})")
        rows.append([md_text(a), *cells])
    return ("## Judge vs judge\n\nEach cell: mean absolute difference of the two judges' totals / Krippendorff's "
            "alpha (interval) of their totals, over the n cases both scored completely.\n\n"
            + table(["", *(md_text(j) for j in d.judges)], rows))


def _reliability(d: ReportData) -> str:
    rel = d.reliability
    keys = [x.id for x in d.rubric.dimensions] + ["total"]
    rows = []
    for k in keys:
        a = rel.across_judges.get(k)
        rows.append([md_text(fmt.key_label(d.rubric, k)), fmt.alpha_value(a), fmt.alpha_ci(a),
                     str(a.n_units) if a is not None else "",
                     fmt.alpha_text(rel.stars[k]) if k in rel.stars else ""])
    text = (f"## Reliability (Krippendorff's alpha)\n\nAcross judges, with the bootstrap 95% interval over cases. "
            f"Source: {d.reliability_source}.\n\n"
            + table(["", "scores (interval)", "95% CI", "cases", "stars (ordinal)"], rows,
                    [False, True, True, True, True]))
    within = rel.within_judge
    if within:
        dims = d.rubric.dimensions
        wrows = [[md_text(j), *(fmt.alpha_text(per.get(x.id)) for x in dims)] for j, per in within.items()]
        text += ("\n\nRun-to-run stability (alpha across each judge's repeated runs):\n\n"
                 + table(["judge", *(md_text(x.name) for x in dims)], wrows))
    return text


def _metrics(d: ReportData) -> str:
    if not d.metrics:
        return ("## Deterministic metrics\n\nNone: save metric results as JSON in `metrics/` in the output folder "
                "to show them here.")
    blocks = ["## Deterministic metrics"]
    for m in d.metrics:
        block = f"### {md_text(m.name)}"
        if m.error:
            block += f"\n\n{md_text(m.error)}"
        if m.context:
            block += "\n\n" + " · ".join(f"{md_text(k)}: {md_text(v)}" for k, v in m.context)
        if m.values:
            block += "\n\n" + table(["metric", "value"], [[md_text(k), fmt.num(v)] for k, v in m.values], [False, True])
        blocks.append(block)
    return "\n\n".join(blocks)


def _human(d: ReportData) -> str:
    h = d.human
    if not h:
        return ""
    keys = [x.id for x in d.rubric.dimensions] + ["total"]
    arows = [[md_text(fmt.key_label(d.rubric, k)), fmt.alpha_text(h.alpha_without_human.get(k)),
              fmt.alpha_text(h.alpha_with_human.get(k))] for k in keys]
    jac = h.category_jaccard or {}
    raters: list[tuple[str, dict[str, Agreement]]] = [*h.judges.items(), ("panel", h.panel)]
    jrows = [[md_text(name), str(per["total"].n), fmt.fixed(per["total"].mae), fmt.fixed(per["total"].bias),
              fmt.fixed(per["total"].pearson, 3), fmt.fixed(per["total"].spearman, 3), fmt.fixed(jac.get(name))]
             for name, per in raters]
    return (f"## Agreement with the human\n\n{h.n_cases} case(s) with human labels.\n\n"
            + table(["", "alpha, judges only", "alpha, judges + human"], arows)
            + "\n\nEach judge against the human, on the total (bias: mean of rater - human):\n\n"
            + table(["rater", "n", "MAE", "bias", "Pearson", "Spearman", "category Jaccard"], jrows,
                    [False] + [True] * 6))


def _costs(d: ReportData) -> str:
    counts = ("ok", "failed", "attempts", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")
    rows = [[md_text(j), *(fmt.integer(getattr(t, k)) for k in counts), fmt.money(t.cost)]
            for j, t in d.costs.items()]
    header = ["judge", "calls ok", "failed", "attempts", "prompt tokens", "cached", "completion", "reasoning", "cost"]
    return "## Cost and tokens per judge\n\n" + table(header, rows, [False] + [True] * 8)


def _ranking(d: ReportData) -> str:
    rows = [[str(a.rank), md_text(a.case_id), a.status, fmt.num(a.disagreement), fmt.num(a.spread), str(a.star_gaps),
             str(a.singletons), str(a.mismatches), fmt.num(a.total)] for a in d.ranking]
    header = ["#", "case", "status", "disagreement", "spread", "star gaps", "singletons", "mismatches", "total"]
    text = ("## Disagreement ranking\n\ndisagreement = spread of judge totals + 5 × star gaps + singletons + "
            "2 × claimed-vs-derived mismatches; failed and inconclusive cases first.\n\n"
            + table(header, rows, [True, False, False, True, True, True, True, True, True]))
    top = d.ranking[:MARKDOWN_TOP]
    if top:
        text += f"\n\n### The {len(top)} most disputed cases\n\n" + "\n\n".join(_case_details(a) for a in top)
    return text


def _case_details(a: CaseAudit) -> str:
    lines = [f"#### #{a.rank} {md_text(a.case_id)} ({a.status}, disagreement {fmt.num(a.disagreement)})"]
    if a.flags:
        lines.append(f"\nFlags: {md_text('; '.join(a.flags))}")
    if a.status == "failed":
        lines.append("\nNo judge answered: " + " · ".join(f"{md_text(j)}: {md_text('; '.join(es))}"
                                                      for j, es in a.errors_by_judge().items()))
    else:
        for dim in a.dimensions:
            lines.extend(_dimension_lines(dim))
    if a.mismatch_runs:
        lines.append("\nClaimed vs derived:")
        lines += [f"- {md_text(m.judge)} run {m.run}, {md_text(m.dimension_name)}: claimed {fmt.num(m.claimed_score)} "
                  f"({m.claimed_stars if m.claimed_stars is not None else fmt.DASH}★), derived "
                  f"{fmt.num(m.derived_score)} ({m.derived_stars}★)" for m in a.mismatch_runs]
    return "\n".join(lines)


_MATCH_NOTE = {"none": " **[singleton]**", "category": " [same category]", "type": "", "no_peer": ""}


def _dimension_lines(dim: DimensionAudit) -> list[str]:
    if dim.quiet:
        return [f"\n{md_text(dim.name)}: no judge deducted anything."]
    lines = [f"\n{md_text(dim.name)} (panel {fmt.num(dim.panel_score)}, star gap {dim.star_gap}):\n"]
    for v in dim.judges:
        head = f"- {md_text(v.judge)}: {fmt.num(v.score)} ({fmt.stars(v.stars)})"
        if not v.runs_ok:
            lines.append(f"{head}: failed ({md_text('; '.join(v.errors))})")
            continue
        lines.append(head + ("" if v.deductions else ": no deduction"))
        for x in v.deductions:
            quote = f" «{md_text(x.evidence)}»" if x.evidence else ""
            item = f"{md_text(x.category)} / {md_text(x.type)} −{fmt.num(x.points)}"
            lines.append(f"  - {item}{_MATCH_NOTE[x.match]}{quote}")
    return lines
