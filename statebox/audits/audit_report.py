"""`statebox audit PATH --html OUT.html`: the audit alone, as one self-contained page.

What the run report shows of the audit (verdicts per agent, findings by category), for any audited
sessions, with each finding's proof: the event it names (kind, source file and line, or the Inspect
message / ATIF step) and that event's text, plus filters (agent, verdict, category, format, free text).
A module of its own rather than part of `statebox/report/`: those render a run (scores, store rows,
plots), and `audits` may not import `harness` (layer rules); the styling follows the run report's
(same colours for clean / suspicious / contaminated), kept small here.

Every string in the page came from a session, so every one is hostile: all text is HTML-escaped, the
page loads nothing, and its policy (`page_policy.py`) runs its own script alone, by hash: no handler or script a
session wrote runs even where an escape were missed; event texts are cut to `EVENT_CHARS`; a session shows at
most `findings_shown.FINDINGS_SHOWN` findings (the agent sets how many it makes).
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Iterable

from statebox.audits.external import AuditedSession
from statebox.audits.findings_shown import shown_indexes
from statebox.page_policy import page_policy, policy_meta
from statebox.replace_file import HTML_PAGE, replace_text
from statebox.schema import Event, Finding

EVENT_CHARS = 2000
VERDICTS = ("clean", "suspicious", "contaminated")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px} .sub{color:#59636e;margin-bottom:16px}
table{border-collapse:collapse;margin:6px 0 12px} th,td{border:1px solid #d1d9e0;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.n{text-align:right;font-variant-numeric:tabular-nums}
.v{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px}
.v.clean{background:#dafbe1;color:#116329}.v.suspicious{background:#fff8c5;color:#7d4e00}.v.contaminated{background:#ffebe9;color:#a40e26}
.filters{display:flex;gap:8px;flex-wrap:wrap;margin:8px 0 12px;padding:8px;background:#f6f8fa;border:1px solid #d1d9e0}
.filters label{font-size:12px;color:#59636e} select,input{font:inherit}
details.s{border:1px solid #d1d9e0;margin:6px 0;border-radius:6px} details.s>summary{padding:6px 10px;cursor:pointer}
details.s[open]>summary{border-bottom:1px solid #d1d9e0;background:#f6f8fa} .body{padding:8px 10px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px;margin:4px 0;max-height:22em;overflow:auto;font-size:12px}
.meta{color:#59636e;font-size:12px} .sev{font-weight:600} .proof,.high{color:#a40e26} .medium{color:#7d4e00} .low{color:#59636e}
"""

JS = """
(function(){
  var f={agent:document.getElementById('f-agent'),verdict:document.getElementById('f-verdict'),
         category:document.getElementById('f-category'),format:document.getElementById('f-format'),text:document.getElementById('f-text')};
  function apply(){
    var shown=0, rows=document.querySelectorAll('details.s');
    for(var i=0;i<rows.length;i++){
      var r=rows[i], d=r.dataset, q=f.text.value.toLowerCase();
      var ok=(!f.agent.value||d.agent===f.agent.value)&&(!f.verdict.value||d.verdict===f.verdict.value)
        &&(!f.format.value||d.format===f.format.value)
        &&(!f.category.value||(' '+d.categories+' ').indexOf(' '+f.category.value+' ')>=0)
        &&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
      r.style.display=ok?'':'none'; if(ok)shown++;
    }
    document.getElementById('f-count').textContent=shown+' of '+rows.length+' sessions';
  }
  for(var k in f){f[k].addEventListener('input',apply);f[k].addEventListener('change',apply);}
  apply();
})();
"""
AUDIT_POLICY_META = policy_meta(page_policy(JS))  # JS alone runs: no handler or script a session wrote (page_policy.py)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _e(value: object) -> str:
    """Escaped for HTML, a lone surrogate spelt `<U+D800>`: JSON lets a session's string hold one (`"\\ud800"`),
    UTF-8 cannot, and writing the page raised on it (an agent could print one to keep its audit unwritten)."""
    return html.escape(_LONE_SURROGATE.sub(lambda m: f"<U+{ord(m.group()):04X}>", str(value)), quote=True)


def _badge(verdict: str) -> str:
    return f'<span class="v {_e(verdict)}">{_e(verdict)}</span>'


def proving_events(session: AuditedSession) -> Callable[[Finding], Event | None]:
    """The event each finding of a session names: the agent's own event with that seq (not one derived from
    it), else the first event with that seq.

    Why one pass: looking each finding's event up by reading the whole log made a session of thousands of
    findings (an agent that repeats a forbidden command) quadratic to write."""
    log = session.row.log
    own: dict[int, Event] = {}
    first: dict[int, Event] = {}
    for event in log.events if log is not None else []:
        first.setdefault(event.seq, event)
        if "derived_from" not in (event.data or {}):
            own.setdefault(event.seq, event)

    def lookup(finding: Finding) -> Event | None:
        if finding.event is None:
            return None
        found = own.get(finding.event)
        return found if found is not None else first.get(finding.event)
    return lookup


def _event_html(event: Event | None, finding: Finding) -> str:
    if event is None:
        why = "recorded by the run (not in this log)" if finding.rule.startswith("recorded by the run") \
            else "the session's size: read in part" if finding.category == "audit_limit" else "host evidence"
        return f'<div class="meta">no event: {_e(why)}</div>'
    where = f"{event.source}:{event.line}" if event.line is not None else event.source
    text = event.text if len(event.text) <= EVENT_CHARS else event.text[:EVENT_CHARS] + f"\n[... {len(event.text) - EVENT_CHARS} more characters]"
    return (f'<div class="meta">event {event.seq} · {_e(event.kind.value)} · {_e(where)}</div>'
            f"<pre>{_e(text)}</pre>")


def _per_agent(sessions: list[AuditedSession]) -> str:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for s in sessions:
        counts[s.row.agent or "-"][s.row.verdict.verdict] += 1
    rows = "".join(f"<tr><td>{_e(agent)}</td>" + "".join(f'<td class="n">{c[v]}</td>' for v in VERDICTS)
                   + f'<td class="n">{sum(c.values())}</td></tr>' for agent, c in sorted(counts.items()))
    head = "".join(f"<th>{_badge(v)}</th>" for v in VERDICTS)
    return f"<table><tr><th>agent</th>{head}<th>sessions</th></tr>{rows}</table>"


def _per_category(sessions: list[AuditedSession]) -> str:
    sess: Counter[str] = Counter()
    found: Counter[str] = Counter()
    worst: dict[str, str] = {}
    order = {"proof": 0, "high": 1, "medium": 2, "low": 3}
    for s in sessions:
        for cat in {f.category for f in s.row.verdict.findings}:
            sess[cat] += 1
        for f in s.row.verdict.findings:
            found[f.category] += 1
            worst[f.category] = min(worst.get(f.category, f.severity), f.severity, key=order.__getitem__)
    if not found:
        return "<p>No findings in any session.</p>"
    rows = "".join(f'<tr><td>{_e(c)}</td><td class="n">{sess[c]}</td><td class="n">{found[c]}</td>'
                   f'<td class="sev {_e(worst[c])}">{_e(worst[c])}</td></tr>' for c in sorted(found))
    return f"<table><tr><th>category</th><th>sessions</th><th>findings</th><th>worst</th></tr>{rows}</table>"


def _options(values: Iterable[str]) -> str:
    return "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in sorted(set(values)) if v)


def _session_html(s: AuditedSession) -> str:
    v = s.row.verdict
    cats = sorted({f.category for f in v.findings})
    proving_event = proving_events(s)
    shown = [v.findings[i] for i in shown_indexes([(f.category, f.severity) for f in v.findings])]
    findings = "".join(
        f'<tr><td>{_e(f.category)}</td><td class="sev {_e(f.severity)}">{_e(f.severity)}</td><td>{_e(f.rule)}</td>'
        f"<td><pre>{_e(f.quote)}</pre>{_event_html(proving_event(f), f)}</td></tr>" for f in shown)
    more = len(v.findings) - len(shown)
    rest = f'<div class="meta">{more:,} more finding(s), less severe or later: in the verdict JSON (--json)</div>' \
        if more else ""
    table = (f"<table><tr><th>category</th><th>severity</th><th>rule</th><th>quote and the event that proves it</th></tr>"
             f"{findings}</table>{rest}") if findings else "<p>No findings.</p>"
    notes = "".join(f'<div class="meta">note: {_e(n)}</div>' for n in s.row.notes)
    score = f' · task score {_e(s.task_score)}' if s.task_score else ""
    return (f'<details class="s" data-agent="{_e(s.row.agent or "-")}" data-verdict="{_e(v.verdict)}" '
            f'data-format="{_e(s.fmt)}" data-categories="{_e(" ".join(cats))}">'
            f"<summary>{_badge(v.verdict)} <b>{_e(s.row.attempt)}</b> · {_e(s.row.agent or '-')} · item {_e(s.row.item or '-')}"
            f" · {len(v.findings)} finding(s){(' · ' + _e(', '.join(cats))) if cats else ''}</summary>"
            f'<div class="body"><div class="meta">{_e(s.fmt)} · {_e(s.source)} · action {_e(v.action)}{score}</div>'
            f"{notes}{table}</div></details>")


def audit_report_html(sessions: list[AuditedSession], title: str = "statebox audit") -> str:
    counts: Counter[str] = Counter(s.row.verdict.verdict for s in sessions)
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
    order = {"contaminated": 0, "suspicious": 1, "clean": 2}
    ordered = sorted(sessions, key=lambda s: (order[s.row.verdict.verdict], s.row.agent, s.row.attempt))
    filters = (
        '<div class="filters">'
        f'<label>agent <select id="f-agent"><option value="">all</option>{_options(s.row.agent or "-" for s in sessions)}</select></label>'
        f'<label>verdict <select id="f-verdict"><option value="">all</option>{_options(s.row.verdict.verdict for s in sessions)}</select></label>'
        f'<label>category <select id="f-category"><option value="">all</option>{_options(f.category for s in sessions for f in s.row.verdict.findings)}</select></label>'
        f'<label>format <select id="f-format"><option value="">all</option>{_options(s.fmt for s in sessions)}</select></label>'
        '<label>text <input id="f-text" type="search" placeholder="command, path, quote"></label>'
        '<span id="f-count" class="meta"></span></div>'
    )
    return (
        "<!doctype html><html><head><meta charset=\"utf-8\">"
        f"{AUDIT_POLICY_META}"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1><div class=\"sub\">{len(sessions)} sessions: {_e(summary)}. Verdicts follow what each agent did "
        "(commands, tool inputs, code it ran, what its tools showed it reached); the prompt's text never counts against it.</div>"
        f"<h2>Verdicts per agent</h2>{_per_agent(sessions)}"
        f"<h2>Findings by category</h2>{_per_category(sessions)}"
        f"<h2>Sessions</h2>{filters}{''.join(_session_html(s) for s in ordered)}"
        f"<script>{JS}</script></body></html>"
    )


def write_audit_report(out: Path, sessions: list[AuditedSession], title: str = "statebox audit") -> Path:
    """Write the page (temp file + rename: a reader never sees half of it)."""
    out = Path(out)
    replace_text(out, audit_report_html(sessions, title), HTML_PAGE)  # `--html S.jsonl` replaced the session audited
    return out
