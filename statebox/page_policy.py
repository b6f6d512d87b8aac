"""The Content-Security-Policy of every HTML page statebox writes: the page's own script runs, nothing else does.

Why: every page shows strings an agent or a handed-over dataset wrote (answers, transcripts, findings, questions,
dataset names). They are escaped where they are shown (report/visible_text.py, the page script's `vis()`); this
policy is the second wall, so that an escape missed somewhere shows markup instead of running it. A policy with
`script-src 'unsafe-inline'` is no wall: it lets an injected `onerror=` attribute or `<script>` run (the audit page
had one; tests/report/test_report_hostile_strings.py ran a planted handler through it). Here the page's one inline
script is allowed by its SHA-256 and nothing else inline: no event-handler attribute, no injected `<script>`, no
`javascript:` URL. `'strict-dynamic'` passes that trust to the scripts the page itself creates (the split report's
chunk files, loaded by `<script src>` from `REPORT_files/`, which no hash can name in advance). Styles stay inline
(a style cannot run code); no image, font, frame, form or base URL is allowed; the only connection is to the page's
own origin (the live view's API; a report opened from a file makes none).

A `<meta>` policy (a file has no response headers) covers everything after it, so it is the head's first element
after the charset.
"""

from __future__ import annotations

import base64
import hashlib
import html


def script_hash(script: str) -> str:
    """The CSP hash source of an inline script: its exact text between `<script>` and `</script>`, as UTF-8."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"


def page_policy(script: str, *, scripts_it_loads: bool = False, own_origin_api: bool = False) -> str:
    """The policy of a page whose only inline script is `script` (`scripts_it_loads`: it adds `<script src>`
    elements of its own; `own_origin_api`: it fetches from the origin that served it)."""
    sources = [script_hash(script)] + (["'strict-dynamic'"] if scripts_it_loads else [])
    directives = [
        "default-src 'none'",
        "script-src " + " ".join(sources),
        "style-src 'unsafe-inline'",
        "connect-src 'self'" if own_origin_api else "",
        "base-uri 'none'",
        "form-action 'none'",
    ]
    return "; ".join(d for d in directives if d)


# the policy of an answer that is not a page of ours (a fragment or JSON the live view serves, opened on its own):
# nothing runs or loads
NOTHING_RUNS = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def policy_meta(policy: str) -> str:
    """The `<meta http-equiv>` element that carries `policy` in a page (its sources' single quotes as they are: the
    attribute is double-quoted, and a policy never holds a double quote)."""
    if '"' in policy:
        raise ValueError("a policy holds no double quote")
    return f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy, quote=False)}">'
