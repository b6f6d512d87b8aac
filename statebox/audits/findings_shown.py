"""Which of a session's findings a page shows: the agent decides how many its session makes.

60,000 distinct code walks made 50,000 findings, a 16 MB audit page for one session; a run of such attempts
made a report of gigabytes. A page (the audit's HTML, the run report's transcript, an Inspect score's explanation)
shows at most FINDINGS_SHOWN per session and says how many more the verdict
holds (the verdict JSON keeps them all). Chosen: every `audit_limit` finding (why the session was read in part),
then the most severe, earliest first; shown in the verdict's order."""

from __future__ import annotations

from typing import Sequence

FINDINGS_SHOWN = 100
_SEVERITY_ORDER = {"proof": 0, "high": 1, "medium": 2, "low": 3}


def shown_indexes(kinds: Sequence[tuple[str, str]]) -> list[int]:
    """Indexes of the findings to show, in order, from each finding's (category, severity)."""
    if len(kinds) <= FINDINGS_SHOWN:
        return list(range(len(kinds)))
    ranked = sorted(range(len(kinds)),
                    key=lambda i: (kinds[i][0] != "audit_limit", _SEVERITY_ORDER.get(kinds[i][1], len(_SEVERITY_ORDER)), i))
    return sorted(ranked[:FINDINGS_SHOWN])
