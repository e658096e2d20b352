"""``trialbox report --html FILE``: one self-contained page (no network needed to open it).

Plots are inline SVG, drawn here: pass@k and pass^k against k per candidate
with their intervals, cost per accepted run with intervals, the latency
distribution, the per-task paired differences, and the decision with its
reasons. A few lines of script check that every plot rendered and put the
result in the page title (``trialbox report: ok``), which the test reads from
headless Chromium.

Every value taken from the report goes through ``_esc`` (``textsafe.html_text``:
made ``printable``, then HTML-escaped, quotes included), in text and attributes
alike: candidate names, task ids, node names, reasons and warnings can quote
what an agent or a node sent. Only trialbox's own constants (sizes, colours)
and numbers it formats itself are interpolated as they are.
"""

from __future__ import annotations

from typing import Any

from .summary import _money_estimate, model_side, money
from .textsafe import html_text

W, H, PAD = 520, 260, 44
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def _esc(x: Any) -> str:
    """Any value as HTML text or attribute content: ``printable``, then escaped (``&<>"'``)."""
    return html_text(x)


def _frame(title: str, body: str, x_label: str, y_label: str) -> str:
    return (f'<figure><figcaption>{_esc(title)}</figcaption><svg class="plot" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" role="img" aria-label="{_esc(title)}">'
            f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#333"/>'
            f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>'
            f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="12">{_esc(x_label)}</text>'
            f'<text x="12" y="{H / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 12 {H / 2})">{_esc(y_label)}</text>'
            f'{body}</svg></figure>')


def _scale(v: float, lo: float, hi: float, a: float, b: float) -> float:
    return a + (b - a) * ((v - lo) / (hi - lo) if hi > lo else 0.5)


def _legend(names: list[str], offset: int = 0) -> str:
    return "".join(f'<rect x="{W - 150}" y="{14 + 16 * i}" width="10" height="10" fill="{COLORS[(i + offset) % len(COLORS)]}"/>'
                   f'<text x="{W - 135}" y="{23 + 16 * i}" font-size="11">{_esc(n)}</text>' for i, n in enumerate(names))


def _whisker_h(x1: float, x2: float, y: float, color: str, cap: float = 5) -> str:
    """A horizontal interval with caps at both ends."""
    return (f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" stroke-width="2"/>'
            f'<line x1="{x1:.1f}" x2="{x1:.1f}" y1="{y - cap:.1f}" y2="{y + cap:.1f}" stroke="{color}" stroke-width="2"/>'
            f'<line x1="{x2:.1f}" x2="{x2:.1f}" y1="{y - cap:.1f}" y2="{y + cap:.1f}" stroke="{color}" stroke-width="2"/>')


def _whisker_v(x: float, y1: float, y2: float, color: str, cap: float = 4) -> str:
    """A vertical interval with caps at both ends."""
    return (f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" stroke="{color}" stroke-width="2"/>'
            f'<line x1="{x - cap:.1f}" x2="{x + cap:.1f}" y1="{y1:.1f}" y2="{y1:.1f}" stroke="{color}" stroke-width="2"/>'
            f'<line x1="{x - cap:.1f}" x2="{x + cap:.1f}" y1="{y2:.1f}" y2="{y2:.1f}" stroke="{color}" stroke-width="2"/>')


def _figure(e: dict[str, Any], fmt: str = "{:.3f}") -> str:
    """``value [lo, hi]`` as printed beside a whisker."""
    if e.get("value") is None:
        return "undefined"
    iv = e.get("interval")
    return fmt.format(e["value"]) + (f" [{fmt.format(iv[0])}, {fmt.format(iv[1])}]" if iv else " (no interval)")


def decision_plot(report: dict[str, Any]) -> str:
    """The figures the decision rests on, one row each with its interval and its value written beside it: each
    candidate's primary metric, then each comparison's difference (paired, on the tasks both have). The axis is
    the metric's own range ([0, 1], or [-1, 1] with differences); an interval reaching past it is drawn to the
    edge without a cap there (its value beside it says how far)."""
    names = list(report["candidates"])
    color = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    metric, _, k = str(report["primary_metric"]).partition("@")
    rows: list[tuple[str, dict[str, Any], str]] = []
    for n, c in report["candidates"].items():
        by_k = c.get(metric)
        e = by_k.get(k or "1") if isinstance(by_k, dict) and "value" not in by_k else by_k
        rows.append((n, e if isinstance(e, dict) else {"value": None}, color[n]))
    for comp in report["comparisons"]:
        rows.append((f"{comp['candidate']} − {comp['baseline']}", comp["difference"], "#333"))
    lo = -1.0 if report["comparisons"] else 0.0
    lo_x, hi_x = PAD + 150, W - 150
    x = lambda v: _scale(min(1.0, max(lo, v)), lo, 1.0, lo_x, hi_x)  # noqa: E731
    step = (H - PAD - 24) / max(1, len(rows))
    parts = [f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="14" y2="{H - PAD}" stroke="#999" stroke-dasharray="3 3"/>']
    parts += [f'<text x="{x(t):.1f}" y="{H - PAD + 14}" text-anchor="middle" font-size="10">{t:g}</text>'
              for t in ((-1, -0.5, 0, 0.5, 1) if lo < 0 else (0, 0.25, 0.5, 0.75, 1))]
    for i, (label, e, col) in enumerate(rows):
        yy = 24 + step * (i + 0.5)
        shown = label if len(label) <= 26 else label[:25] + "…"
        parts.append(f'<text x="{lo_x - 8}" y="{yy + 4:.1f}" text-anchor="end" font-size="11">{_esc(shown)}'
                     f'<title>{_esc(label)}</title></text>')
        if e.get("value") is None:
            parts.append(f'<text x="{lo_x}" y="{yy + 4:.1f}" font-size="11" fill="#999">undefined</text>')
            continue
        if e.get("interval"):
            a, b = e["interval"]
            parts.append(f'<line x1="{x(a):.1f}" x2="{x(b):.1f}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{col}" '
                         f'stroke-width="2"/>')
            parts += [f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{yy - 5:.1f}" y2="{yy + 5:.1f}" stroke="{col}" '
                      f'stroke-width="2"/>' for v in (a, b) if lo <= v <= 1.0]
        parts.append(f'<circle cx="{x(e["value"]):.1f}" cy="{yy:.1f}" r="4" fill="{col}"/>')
        parts.append(f'<text x="{hi_x + 8}" y="{yy + 4:.1f}" font-size="10">{_esc(_figure(e))}</text>')
    return _frame(f"what the decision rests on: {report['primary_metric']} (95% intervals)", "".join(parts),
                  str(report["primary_metric"]), "")


def pass_plot(report: dict[str, Any], metric: str, label: str) -> str:
    names = list(report["candidates"])
    ks = sorted({int(k) for c in report["candidates"].values() for k in c[metric]})
    x = lambda k: _scale(k, ks[0], ks[-1], PAD + 30, W - 180)  # noqa: E731
    y = lambda v: _scale(v, 0, 1, H - PAD, 16)  # noqa: E731
    dodge = lambda i: (i - (len(names) - 1) / 2) * 10  # noqa: E731  (candidates side by side at each k)
    parts = [f'<line x1="{PAD}" x2="{W - 170}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#eee"/>' for t in (0.25, 0.5, 0.75, 1)]
    parts += [f'<text x="{PAD - 6}" y="{y(t) + 4}" text-anchor="end" font-size="10">{t:.2f}</text>'
              for t in (0, 0.25, 0.5, 0.75, 1)]
    parts += [f'<text x="{x(k)}" y="{H - PAD + 14}" text-anchor="middle" font-size="10">{_esc(k)}</text>' for k in ks]
    for i, name in enumerate(names):
        color, pts = COLORS[i % len(COLORS)], []
        for k in ks:
            e = report["candidates"][name][metric].get(str(k))
            if not e or e["value"] is None:
                continue
            xx = x(k) + dodge(i)
            pts.append(f"{xx:.1f},{y(e['value']):.1f}")
            if e.get("interval"):
                parts.append(_whisker_v(xx, y(e["interval"][0]), y(e["interval"][1]), color))
            parts.append(f'<circle cx="{xx:.1f}" cy="{y(e["value"]):.1f}" r="3.5" fill="{color}">'
                         f'<title>{_esc(name)} {_esc(label)} k={_esc(k)}: {_esc(_figure(e))}</title></circle>')
        if len(pts) > 1:
            parts.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color}" opacity="0.5"/>')
    return _frame(f"{label} against k (95% intervals)", "".join(parts) + _legend(names), "k", label)


def cost_plot(report: dict[str, Any]) -> str:
    rows = [(n, c["cost_per_accepted_usd"]) for n, c in report["candidates"].items()]
    top = max([e["interval"][1] if e.get("interval") else (e["value"] or 0) for _, e in rows] + [1e-9])
    x = lambda v: _scale(v, 0, top * 1.05, PAD + 10, W - 200)  # noqa: E731
    parts = [f'<text x="{x(t):.1f}" y="{H - PAD + 14}" text-anchor="middle" font-size="10">${t:.3g}</text>'
             for t in (0, top / 2, top)]
    step = (H - PAD - 24) / max(1, len(rows))
    for i, (name, e) in enumerate(rows):
        yy = 24 + step * (i + 0.5)
        color = COLORS[i % len(COLORS)]
        parts.append(f'<text x="{PAD + 10}" y="{yy - 9:.1f}" font-size="11">{_esc(name)}</text>')
        if e["value"] is None:
            parts.append(f'<text x="{PAD + 10}" y="{yy + 8:.1f}" font-size="11" fill="#999">undefined: {_esc(e.get("reason", ""))}</text>')
            continue
        if e.get("interval"):
            parts.append(_whisker_h(x(e["interval"][0]), x(e["interval"][1]), yy, color))
        parts.append(f'<circle cx="{x(e["value"]):.1f}" cy="{yy:.1f}" r="4" fill="{color}"/>')
        iv = e.get("interval")
        said = f"${e['value']:.3g}" + (f" [${iv[0]:.3g}, ${iv[1]:.3g}]" if iv else " (no interval)")
        parts.append(f'<text x="{W - 192}" y="{yy + 4:.1f}" font-size="10">{_esc(said)}</text>')
    return _frame("cost per accepted run, USD (95% intervals)", "".join(parts), "USD", "")


def latency_plot(report: dict[str, Any]) -> str:
    names = list(report["candidates"])
    durations = {n: [t["duration_s"] or 0 for t in report["trials"] if t["candidate"] == n] for n in names}
    top = max([max(v) for v in durations.values() if v] + [1e-9])
    parts = []
    for i, name in enumerate(names):
        xx = _scale(i, -0.5, len(names) - 0.5, PAD, W - 20)
        parts.append(f'<text x="{xx:.1f}" y="{H - PAD + 14}" text-anchor="middle" font-size="10">{_esc(name)}</text>')
        for j, d in enumerate(durations[name]):
            parts.append(f'<circle cx="{xx + ((j % 7) - 3) * 3:.1f}" cy="{_scale(d, 0, top * 1.1, H - PAD, 16):.1f}" r="2.5" '
                         f'fill="{COLORS[i % len(COLORS)]}" opacity="0.6"/>')
        c = report["candidates"][name]
        for q, dash in (("latency_p50_s", ""), ("latency_p95_s", ' stroke-dasharray="4 2"')):
            if c.get(q) is not None:
                yy = _scale(c[q], 0, top * 1.1, H - PAD, 16)
                parts.append(f'<line x1="{xx - 18:.1f}" x2="{xx + 18:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#000"{dash}/>')
    parts.append(f'<text x="{PAD - 6}" y="20" text-anchor="end" font-size="10">{top * 1.1:.0f}s</text>')
    return _frame("latency per trial (solid p50, dashed p95)", "".join(parts), "candidate", "seconds")


def paired_plot(report: dict[str, Any]) -> str:
    parts = []
    comps = report["comparisons"]
    tasks = sorted({t for c in comps for t in c.get("per_task", {})})
    y = lambda v: _scale(v, -1, 1, H - PAD, 16)  # noqa: E731
    parts.append(f'<line x1="{PAD}" x2="{W - 20}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#999" stroke-dasharray="3 3"/>')
    parts += [f'<text x="{PAD - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{v:+.0f}</text>' for v in (-1, 0, 1)]
    for i, comp in enumerate(comps):
        for j, t in enumerate(tasks):
            if t in comp.get("per_task", {}):
                xx = _scale(j, -0.5, max(1, len(tasks)) - 0.5, PAD, W - 170) + 4 * i
                parts.append(f'<circle cx="{xx:.1f}" cy="{y(comp["per_task"][t]):.1f}" r="3.5" fill="{COLORS[(i + 1) % len(COLORS)]}">'
                             f'<title>{_esc(t)}: {comp["per_task"][t]:+.3f}</title></circle>')
    legend = _legend([f"{c['candidate']} − {c['baseline']}" for c in comps], offset=1) if comps else ""
    return _frame(f"per-task paired differences ({report['primary_metric']})", "".join(parts) + legend,
                  f"{len(tasks)} tasks", "difference")


def render(report: dict[str, Any], trial_link: Any = None) -> str:
    """The whole report as one self-contained page (``trialbox report --html``); ``trial_link`` as in
    ``report_body`` (``--viewer``: each task's cells link to the viewer)."""
    a = report["adoption"]
    badge = {"ADOPT": "#2ca02c", "REJECT": "#d62728", "INCONCLUSIVE": "#ff7f0e"}.get(a["decision"], "#777")
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>trialbox report</title>
<style>body{{font:14px system-ui,sans-serif;margin:24px;max-width:1100px}}figure{{display:inline-block;margin:8px}}
figcaption{{font-weight:600;margin-bottom:4px}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px}}
.decision{{color:#fff;background:{badge};padding:6px 12px;display:inline-block;border-radius:4px;font-weight:700}}
.warn{{color:#a60}}</style></head><body>
<h1>trialbox report — run {_esc(report['run']['id'])}</h1>
{report_body(report, trial_link)}
<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message)));
window.addEventListener("load", () => {{
  const plots = document.querySelectorAll("svg.plot");
  const empty = [...plots].filter(p => p.getBBox().width === 0 || p.childElementCount < 3);
  document.title = (plots.length === {PLOTS} && !empty.length && !window.__errors.length)
    ? "trialbox report: ok" : "trialbox report: broken (" + empty.length + " empty, " + window.__errors.join("; ") + ")";
}});
</script></body></html>
"""


PLOTS = 6
"""The plots ``report_body`` draws."""


def report_body(report: dict[str, Any], trial_link: Any = None) -> str:
    """The report's content without its page: the run line, warnings, the decision and its reasons, every table
    and the plots (the static page and the viewer's run page both show it). Every string that could come from a
    trial is escaped. ``trial_link(task, candidate)``, when given, is the URL the per-task table links to."""
    a = report["adoption"]
    run = report["run"]
    rows = "".join(
        f"<tr><td>{_esc(n)}</td><td>{_esc(c['n_accepted'])}/{_esc(c['n_trials_in_denominator'])}</td>"
        f"<td>{_esc(c['infra_errors'])}</td><td>{_esc(c['excluded'] or '')}</td><td>{_esc(money(c['cost_usd_total']))}</td>"
        f"<td>{c['latency_p50_s'] or 0:.1f}s / {c['latency_p95_s'] or 0:.1f}s</td></tr>"
        for n, c in report["candidates"].items())
    plots = [decision_plot(report), pass_plot(report, "pass_at_k", "pass@k"), pass_plot(report, "pass_hat_k", "pass^k"),
             cost_plot(report), latency_plot(report), paired_plot(report)]
    warnings = "".join(f"<p class='warn'>warning: {_esc(w)}</p>" for w in report["warnings"])
    stop = run.get("stopped")
    if stop:  # before every figure: they all lack these trials
        warnings = (f"<p class='warn'><strong>RUN STOPPED on "
                    f"{ {'engine_outage': 'an engine outage', 'host_disk_full': 'a full host disk'}.get(stop.get('cause'), 'a configuration error')}:</strong> {_esc(stop['reason'])}; "
                    f"not in any figure: {_esc(len(stop['unrecorded']))} trial(s) that ended on it "
                    f"({_esc(', '.join(stop['unrecorded']))}), {_esc(stop['not_started'])} not started</p>") + warnings
    infra = run.get("infra_errors") or {}
    if infra.get("trials"):
        warnings = (f"<p class='warn'><strong>infrastructure errors: {_esc(infra['trials'])} trial(s)</strong> "
                    f"({_esc(', '.join(f'{k} {n}' for k, n in infra['by_kind'].items()))}), "
                    f"{'above' if infra['above_allowed'] else 'within'} execution.max_infra_errors "
                    f"({_esc(infra['allowed'])}): "
                    + _esc("; ".join(f"{e['trial']}: {e['reason']}" for e in infra["examples"])) + "</p>") + warnings
    cost_table, ablation_table, node_table = _cost_table(report), _ablation_table(report), _node_table(report)
    cost_table = _model_side_table(report) + cost_table + _comparison_table(report) + _grader_figures(report) \
        + _per_task_table(report, trial_link)
    badge = {"ADOPT": "adopt", "REJECT": "reject", "INCONCLUSIVE": "inconclusive"}.get(a["decision"], "other")
    return f"""<p>{_esc(run['finished_trials'])}/{_esc(run['planned_trials'])} trials{' — PROVISIONAL (unfinished run)' if run['provisional'] else ''};
primary metric {_esc(report['primary_metric'])}; confidence {_esc(report['confidence'])}</p>{warnings}
<p class="decision {badge}">{_esc(a['decision'])}</p><ul>{''.join(f'<li>{_esc(r)}</li>' for r in a['reasons'])}</ul>
<table><tr><th>candidate</th><th>accepted</th><th>infra errors</th><th>excluded</th><th>cost</th><th>latency p50/p95</th></tr>{rows}</table>
<div class="plots">{''.join(plots)}</div>
{cost_table}{ablation_table}
{node_table}"""


def _model_side_table(report: dict[str, Any]) -> str:
    """Each model-driven candidate's model side: the models that answered, model calls and tool calls (run by
    trialbox, reported by the model) per trial, what the proxy refused, the trials with a submit summary."""
    rows = []
    for n, c in report["candidates"].items():
        if model_side(c) is None:
            continue
        eff, said = c.get("efficiency") or {}, c.get("summaries") or {}
        refused = (c.get("proxy") or {}).get("requests_refused") or {}
        rows.append(f"<tr><td>{_esc(n)}</td><td>{_esc(', '.join(c.get('models_served') or []) or 'nothing')}</td>"
                    f"<td>{eff.get('model_calls', 0):.1f}</td><td>{eff.get('tool_calls', 0):.1f}</td>"
                    f"<td>{eff.get('model_reported_tool_calls', 0):.1f}</td>"
                    f"<td>{_esc(', '.join(f'{k} {v}' for k, v in refused.items()) or 'nothing')}</td>"
                    f"<td>{_esc(said.get('trials_with_one', 0))}/{_esc(said.get('trials', 0))}</td></tr>")
    if not rows:
        return ""
    return ("<h2>Model side</h2><table><tr><th>candidate</th><th>models served</th><th>model calls per trial</th>"
            "<th>tool calls run by trialbox per trial</th><th>tool calls reported by the model per trial</th>"
            "<th>proxy refused</th><th>trials with a submit summary</th></tr>" + "".join(rows) + "</table>")


def _cost_table(report: dict[str, Any]) -> str:
    kinds = ("model", "tools", "cpu", "memory", "human")
    cost_rows = "".join(
        f"<tr><td>{_esc(n)}</td>" + "".join(f"<td>{_esc(money(c['cost']['by_kind_usd'][k]))}</td>" for k in kinds)
        + f"<td>{_esc(money(c['cost']['total_usd']))}</td><td>{c['cost']['used']['cpu_hours']:.6f}</td>"
        f"<td>{c['cost']['used']['memory_gib_hours']:.6f}</td><td>{_esc(c['cost']['human_minutes'])}</td>"
        f"<td>{_esc(', '.join(c['cost']['unpriced']) or '–')}</td></tr>"
        for n, c in report["candidates"].items() if c.get("cost"))
    cost_table = ("<h2>Cost by kind</h2><table><tr><th>candidate</th>" + "".join(f"<th>{k}</th>" for k in kinds)
                  + "<th>whole</th><th>CPU-hours</th><th>GiB-hours</th><th>human minutes</th><th>used without a price</th>"
                  f"</tr>{cost_rows}</table>") if cost_rows else ""
    return cost_table


def _comparison_table(report: dict[str, Any]) -> str:
    """Each comparison on the tasks it compares: both sides' primary metric and cost per accepted run over those
    tasks only (``commonground``), the paired difference and the cost difference with their intervals."""
    fmt = lambda e: "n/a" if not e or e.get("value") is None else f"{e['value']:.3f}" + (  # noqa: E731
        f" [{e['interval'][0]:.3f}, {e['interval'][1]:.3f}]" if e.get("interval") else "")
    rows = []
    for comp in report["comparisons"]:
        ground = comp.get("on_paired_tasks") or {}
        b, c = ground.get("baseline") or {}, ground.get("candidate") or {}
        rows.append(f"<tr><td>{_esc(comp['candidate'])} − {_esc(comp['baseline'])}</td>"
                    f"<td>{_esc(comp['paired_tasks'])} ({_esc(comp.get('paired_clusters'))} clusters)</td>"
                    f"<td>{_esc(fmt(b.get('metric')))}</td><td>{_esc(fmt(c.get('metric')))}</td>"
                    f"<td>{_esc(fmt(comp['difference']))}</td>"
                    f"<td>{_esc(_money_estimate(b.get('cost_per_accepted_usd')))}</td>"
                    f"<td>{_esc(_money_estimate(c.get('cost_per_accepted_usd')))}</td>"
                    f"<td>{_esc(_money_estimate(comp.get('cost_per_accepted_difference')))}</td></tr>")
    if not rows:
        return ""
    return (f"<h2>Comparisons, on the tasks each compares ({_esc(report['primary_metric'])}; the candidates' own "
            "figures are over all their tasks)</h2><table><tr><th>comparison</th><th>paired tasks</th><th>baseline</th>"
            "<th>candidate</th><th>difference</th><th>baseline cost per accepted</th><th>candidate cost per accepted"
            "</th><th>cost difference</th></tr>" + "".join(rows) + "</table>")


def _ablation_table(report: dict[str, Any]) -> str:
    fmt = lambda e: "n/a" if e.get("value") is None else f"{e['value']:.3f}" + (  # noqa: E731
        f" [{e['interval'][0]:.3f}, {e['interval'][1]:.3f}]" if e.get("interval") else f" ({e.get('reason', 'no interval')})")
    ablation_rows = "".join(
        f"<tr><td>{_esc(ab['candidate'])}</td><td>{_esc(ab['full'])} without {_esc(ab['without'])}</td>"
        f"<td>{_esc(ab['paired_tasks'])}</td><td>{_esc(fmt(ab['full_improvement']))}</td>"
        f"<td>{_esc(fmt(ab['component_adds']))}</td><td>{_esc(fmt(ab['share_persisting']))}</td></tr>"
        for ab in report.get("ablations") or [])
    ablation_table = (f"<h2>Ablations (against {_esc(report['ablations'][0]['baseline'])})</h2><table><tr><th>ablation</th>"
                      "<th>is</th><th>tasks</th><th>full − baseline</th><th>the component adds</th>"
                      f"<th>share persisting without it</th></tr>{ablation_rows}</table>") if ablation_rows else ""
    return ablation_table


def _node_table(report: dict[str, Any]) -> str:
    nodes = report.get("nodes") or {"by_node": {}}
    node_rows = "".join(
        f"<tr><td>{_esc(n)}</td><td>{_esc(e['hardware'].get('cpus'))} × {_esc(e['hardware'].get('cpu_model'))}, "
        f"{_esc(e['hardware'].get('memory_mb'))} MiB, Docker {_esc(e['hardware'].get('docker'))}</td>"
        f"<td>{_esc(e['accepted'])}/{_esc(e['trials'])}</td><td>"
        + ", ".join(f"{_esc(c)} {_esc(v['accepted'])}/{_esc(v['trials'])}" for c, v in e["by_candidate"].items()) + "</td></tr>"
        for n, e in nodes["by_node"].items())
    node_table = (f"<h2>By node</h2><p>{len(nodes.get('split_blocks', []))}/{_esc(nodes.get('blocks', 0))} block(s) split "
                  f"across nodes; {_esc(nodes.get('lost_attempts', 0))} attempt(s) lost with a node</p><table><tr><th>node</th>"
                  f"<th>hardware</th><th>accepted</th><th>by candidate</th></tr>{node_rows}</table>")
    return node_table


def _interval(e: dict[str, Any] | None) -> str:
    if not e or e.get("value") is None:
        return "n/a"
    iv = e.get("interval")
    return f"{e['value']:.3f}" + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")


def _grader_figures(report: dict[str, Any]) -> str:
    """The figures that depend on the graders, per candidate: acceptance with the trials that carry an integrity
    or tampering diagnostic counted as failures beside the plain one, the accepted trials near-identical to the
    reference solution, and each named reward metric of script graders with its interval."""
    rows = []
    for n, c in report["candidates"].items():
        hacks, near = c.get("hacks_counted_as_failures") or {}, c.get("near_identical") or {}
        share = hacks.get("share_of_accepted")
        near_share = near.get("share_of_accepted")
        rewards = "; ".join(f"{m} {_interval(e)} ({e['trials']} trial(s)"
                            + (f", {e['trials_without_it']} without it" if e.get("trials_without_it") else "") + ")"
                            for m, e in (c.get("rewards") or {}).items())
        rows.append(f"<tr><td>{_esc(n)}</td><td>{_esc(_interval(c['pass_at_k'].get('1')))}</td>"
                    f"<td>{_esc(_interval((hacks.get('pass_at_k') or {}).get('1')))}</td>"
                    f"<td>{_esc(hacks.get('accepted_with_diagnostic', 0))}"
                    + (f" ({share:.0%})" if share is not None else "") + "</td>"
                    f"<td>{_esc(near.get('accepted_near_identical', 0))}/{_esc(near.get('accepted_measured', 0))}"
                    + (f" ({near_share:.0%})" if near_share is not None else "") + "</td>"
                    f"<td>{_esc(rewards or '–')}</td></tr>")
    return ("<h2>What the figures owe the graders</h2><table><tr><th>candidate</th><th>pass@1</th>"
            "<th>pass@1, trials with an integrity or tampering diagnostic counted as failures</th>"
            "<th>accepted with such a diagnostic</th><th>accepted near-identical to the reference</th>"
            "<th>reward metrics (script graders)</th></tr>" + "".join(rows) + "</table>") if rows else ""


def _per_task_table(report: dict[str, Any], trial_link: Any = None) -> str:
    """One row per task: each candidate's accepted/trials, the grader's strength (as the run's lock recorded it),
    its survivors and whether the task is suspect (no agent solved it). With ``trial_link(task, candidate)``, each
    candidate's cell links to that task's trials in the viewer."""
    names = list(report["candidates"])
    graders = report.get("graders") or {}
    tasks = sorted({t for c in report["candidates"].values() for t in c.get("per_task") or {}} | set(graders))
    if not tasks:
        return ""
    rows = []
    for t in tasks:
        g = graders.get(t) or {}
        cells = "".join(_task_cell(report["candidates"][n], t, n, trial_link) for n in names)
        strength = "not measured" if g.get("strength") is None else f"{g['strength']:.2f} of {g.get('mutants_graded')}"
        rows.append(f"<tr><td>{_esc(t)}</td>{cells}<td>{_esc(strength)}</td>"
                    f"<td>{_esc(', '.join(g.get('survivors') or []) or '–')}</td>"
                    f"<td>{'suspect' if g.get('suspect') else ''}</td></tr>")
    return ("<h2>Per task</h2><table><tr><th>task</th>" + "".join(f"<th>{_esc(n)}</th>" for n in names)
            + "<th>grader strength (mutants rejected)</th><th>survivors</th><th>solved by no agent</th></tr>"
            + "".join(rows) + "</table>")


def _task_cell(candidate: dict[str, Any], task: str, name: str, trial_link: Any) -> str:
    pt = (candidate.get("per_task") or {}).get(task)
    if not pt:
        return "<td>–</td>"
    text = f"{_esc(pt['accepted'])}/{_esc(pt['trials'])}"
    if trial_link is None:
        return f"<td>{text}</td>"
    return f'<td><a href="{_esc(trial_link(task, name))}">{text}</a></td>'
