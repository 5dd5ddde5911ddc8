"""Calibration outputs: ``calibration.json``, the suite run (``suite.jsonl``), the console table with
its plain recommendation, and the calibration section of report.md and report.html
(:func:`markdown_section`, :func:`html_section`; :func:`add_to_reports` puts them into the reports
of a folder that has a calibration.json)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval.analysis.calibration import PANEL, CalibrationReport, Recall
from consensus_eval.domain.calibration.suite import SuiteCase, dumps_suite
from consensus_eval.output.files import atomic_writer, write_json, write_text

CALIBRATION_JSON = "calibration.json"
SUITE_JSONL = "suite.jsonl"


def write_calibration(out: Path, report: CalibrationReport, suite: list[SuiteCase]) -> Path:
    """Write ``out/calibration.json`` (the report) and ``out/suite.jsonl`` (the suite that was run)."""
    write_json(out / CALIBRATION_JSON, report.model_dump(mode="json"))
    with atomic_writer(out / SUITE_JSONL) as f:
        f.write(dumps_suite(suite))
    return out / CALIBRATION_JSON


def load_calibration(path: Path) -> CalibrationReport:
    """A calibration.json read back (:class:`InputError` naming the file when it is not one)."""
    try:
        return CalibrationReport.model_validate_json(path.read_bytes())
    except OSError as e:
        raise InputError(f"{path}: cannot read the calibration file: {e.strerror or e}") from None
    except ValidationError as e:
        raise InputError(f"{path}: not a calibration.json written by `consensus-eval calibrate`:\n"
                         f"{format_validation_error(e)}") from None


BEGIN, END = "<!-- consensus-eval calibration: begin -->", "<!-- consensus-eval calibration: end -->"


def _splice(text: str, section: str, before: tuple[str, ...]) -> str:
    """``text`` with the calibration section (between BEGIN and END) replaced or inserted before the
    last of the first tag of ``before`` found (appended when none is)."""
    a = text.find(BEGIN)
    if a >= 0:
        z = text.find(END, a)
        text = text[:a] + text[z + len(END) + 1:] if z >= 0 else text[:a]  # END and its line end
    block = f"{BEGIN}\n{section}\n{END}\n"
    for tag in before:
        i = text.rfind(tag)
        if i >= 0:
            return text[:i] + block + text[i:]
    return text.rstrip("\n") + "\n\n" + block


def add_to_reports(out: Path) -> bool:
    """Put the calibration section of ``out/calibration.json`` into ``out/report.md`` and
    ``out/report.html`` (replacing the one a previous call put there); False when the folder has no
    calibration.json. The HTML section uses inline styles only (the report's CSP allows them)."""
    path = out / CALIBRATION_JSON
    if not path.is_file():
        return False
    report = load_calibration(path)
    md, html = out / "report.md", out / "report.html"
    if md.is_file():
        write_text(md, _splice(md.read_text(encoding="utf-8"), markdown_section(report), ()))
    if html.is_file():
        write_text(html, _splice(html.read_text(encoding="utf-8"), html_section(report), ("</main>", "</body>")))
    return True


def cell(r: Recall | None, strict: bool = False) -> str:
    """``83% [70-91] 10/12``: recall, its Wilson 95% interval, found / planted ('' when none planted)."""
    if r is None:
        return ""
    p = r.type_match if strict else r.found
    if p.value is None or p.low is None or p.high is None:
        return ""
    return f"{p.value:.0%} [{p.low:.0%}-{p.high:.0%}] {p.k}/{p.n}"


#: what the headline figure is, said wherever it is shown
SYNTHETIC_NOTE = ("This is recall on synthetic planted errors: the suite's operators write the errors, so it is an "
                  "upper bound for errors that look like theirs; errors written freely are harder to find.")


def _columns(report: CalibrationReport) -> list[str]:
    return [j for j in report.judges if j != PANEL] + [PANEL]


def print_calibration(console: Console, report: CalibrationReport) -> None:
    """Recall by category and by type (judges and the panel), false alarms, score error, recommendation."""
    cols = _columns(report)
    console.print(SYNTHETIC_NOTE, highlight=False, soft_wrap=True)
    for title, key in (("recall on synthetic planted errors, by category", "by_category"),
                       ("recall on synthetic planted errors, by type", "by_type")):
        t = Table(title=f"{title}: planted errors found (category + evidence on the error), "
                        "95% Wilson CI, found/planted")
        t.add_column(key.removeprefix("by_"))
        for c in cols:
            t.add_column(c, justify="right")
        rows = sorted({k for c in cols for k in getattr(report.judges[c], key)})
        for k in rows:
            t.add_row(k, *(cell(getattr(report.judges[c], key).get(k)) for c in cols))
        t.add_row("all", *(cell(report.judges[c].overall) for c in cols), style="bold")
        t.add_row("all, type matched", *(cell(report.judges[c].overall, strict=True) for c in cols))
        console.print(t)
    t = Table(title="false alarms and score error")
    for h in ("judge", "items per clean record", "clean records flagged", "precision on planted",
              *(f"{d} MAE / bias" for d in report.judges[cols[0]].score_error)):
        t.add_column(h, justify="left" if h == "judge" else "right")
    for c in cols:
        jc = report.judges[c]
        fa = "" if jc.false_alarms_per_case is None else f"{jc.false_alarms_per_case:.2f}"
        flagged = "" if jc.clean_flagged.value is None else f"{jc.clean_flagged.k}/{jc.clean_flagged.n}"
        prec = "" if jc.precision.value is None else f"{jc.precision.value:.0%} ({jc.precision.k}/{jc.precision.n})"
        errs = [f"{e.mae:.2f} / {e.bias:+.2f}" if e.mae is not None and e.bias is not None else ""
                for e in jc.score_error.values()]
        t.add_row(c, fa, flagged, prec, *errs)
    console.print(t)
    for c in cols:
        jc = report.judges[c]
        if len(jc.runs_recall) > 1 and jc.consistent is not None and jc.consistent.value is not None:
            per_run = ", ".join("-" if r is None else f"{r:.0%}" for r in jc.runs_recall)
            console.print(f"stability of {c}: recall per run {per_run}; the same verdict in every run on "
                          f"{jc.consistent.k}/{jc.consistent.n} planted errors ({jc.consistent.value:.0%})",
                          highlight=False)
    console.print(f"{report.suite_cases} cases: {report.planted} with {report.errors} planted errors, {report.clean} "
                  f"clean controls; panel = found by at least {report.quorum} judge(s). Types not planted: "
                  f"{', '.join(report.unplantable) or 'none'} (reasons in calibration.json).", highlight=False)
    console.print("[bold]recommendation[/]")
    for line in report.recommendation:
        console.print(f"- {line}", highlight=False)


def _colour(r: Recall | None) -> str:
    """Background by recall: red (0) through amber to green (1); grey when nothing was planted."""
    if r is None or r.found.value is None:
        return "#eeeeee"
    v = r.found.value
    red, green = (int(220 - 120 * v), int(90 + 110 * v))
    return f"rgb({red},{green},110)"


def html_section(report: CalibrationReport) -> str:
    """The calibration section as a self-contained HTML fragment: the recall matrix (types by judges and
    the panel), each cell coloured by recall with its interval and count shown, then the recommendation."""
    cols = _columns(report)
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    rows = []
    for k in sorted({k for c in cols for k in report.judges[c].by_type}):
        cells = "".join(
            f'<td style="background:{_colour(report.judges[c].by_type.get(k))}">'
            f"{escape(cell(report.judges[c].by_type.get(k)))}</td>" for c in cols)
        rows.append(f"<tr><th>{escape(k)}</th>{cells}</tr>")
    total = "".join(f'<td style="background:{_colour(report.judges[c].overall)}"><b>'
                    f"{escape(cell(report.judges[c].overall))}</b></td>" for c in cols)
    rows.append(f"<tr><th>all</th>{total}</tr>")
    recs = "".join(f"<li>{escape(r)}</li>" for r in report.recommendation)
    return (f'<section id="calibration"><h2>Calibration</h2>'
            f"<p>{report.suite_cases} cases ({report.planted} with {report.errors} planted errors, {report.clean} "
            f"clean controls). A planted error is found when the judge deducts in its category with evidence on it. "
            f"Cells: recall on synthetic planted errors, 95% Wilson interval, found/planted; colour by recall. "
            f"Panel: found by at least {report.quorum} judge(s).</p><p><b>{escape(SYNTHETIC_NOTE)}</b></p>"
            f'<table class="calibration"><tr><th>type</th>{head}</tr>{"".join(rows)}</table>'
            f"<p>Recommendation:</p><ul>{recs}</ul></section>")


def markdown_section(report: CalibrationReport) -> str:
    """The calibration section of report.md: the recall matrix (types by judges, with intervals),
    false alarms, score error and the recommendation."""
    cols = _columns(report)
    lines = ["## Calibration", "",
             f"{report.suite_cases} cases ({report.planted} with {report.errors} planted errors, {report.clean} clean "
             f"controls). A planted error is found when the judge deducts in its category with evidence on it; "
             f"cells: recall on synthetic planted errors, 95% Wilson interval, found/planted. Panel: found by at least "
             f"{report.quorum} judge(s).", "", f"**{SYNTHETIC_NOTE}**",
             "", "| type | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    types = sorted({k for c in cols for k in report.judges[c].by_type})
    for k in types:
        lines.append(f"| {k} | " + " | ".join(cell(report.judges[c].by_type.get(k)) for c in cols) + " |")
    lines.append("| **all** | " + " | ".join(cell(report.judges[c].overall) for c in cols) + " |")
    lines += ["", "| judge | items per clean record | precision on planted |", "|---|---:|---:|"]
    for c in cols:
        jc = report.judges[c]
        fa = "" if jc.false_alarms_per_case is None else f"{jc.false_alarms_per_case:.2f}"
        prec = "" if jc.precision.value is None else f"{jc.precision.value:.0%}"
        lines.append(f"| {c} | {fa} | {prec} |")
    lines += ["", "Recommendation:", ""] + [f"- {r}" for r in report.recommendation] + [""]
    return "\n".join(lines)
