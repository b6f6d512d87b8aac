"""Every verdict the auditor gives on every corpus in the tree, as one JSON file: the guard for a change
that must not change what the auditor says (a speed-up, a refactor).

Usage (from the worktree root):
    python tests/audits/verdict_snapshot.py OUT.json            # record
    python tests/audits/verdict_snapshot.py OUT.json --compare OLD.json

Corpora: the held-out batches and the attacks batch (tests/audits/heldout/, unpacked), the labelled
corpus and the real-CLI corpus (attempt folders), each audited on the fast path (prefilter) and the
full path; the CLIs' own session files (tests/audits/cli_session_files/) through `external.audit_path`;
and a generated perf corpus (perf/audit_throughput.py's generator, seed 0) through `audit_run`.
Whole verdicts are compared: every finding's category, severity, event, quote and rule.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "perf"))

from audit_throughput import make_corpus  # noqa: E402
from heldout_eval import manifest, unpack  # noqa: E402

from statebox.audits import external  # noqa: E402
from statebox.audits import external_session
from statebox.audits.verdict import audit_attempt, audit_run  # noqa: E402

HELDOUT_BATCHES = ("attacks", "heldout-1", "heldout-2", "heldout-3")


def _dump(verdict: Any) -> dict[str, Any]:
    return json.loads(verdict.model_dump_json())


def snapshot(perf_mb: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for batch in HELDOUT_BATCHES:
            for case in manifest(batch):
                folder = unpack(batch, case["attempt"], scratch)
                for fast in (True, False):
                    out[f"heldout/{batch}/{case['attempt']}/fast={fast}"] = _dump(audit_attempt(folder, fast=fast, write=False))
        for corpus in ("corpus", "corpus_real"):
            for case in json.loads((HERE / corpus / "manifest.json").read_text()):
                for fast in (True, False):
                    out[f"{corpus}/{case['attempt']}/fast={fast}"] = _dump(
                        audit_attempt(HERE / corpus / case["attempt"], fast=fast, write=False))
        cli = HERE / "cli_session_files"
        items = external_session.read_items(cli / "items.jsonl")
        for session in external.audit_path(cli, None, items=items):
            out[f"cli_session_files/{session.row.attempt}"] = _dump(session.row.verdict)
        make_corpus(scratch / "perf", perf_mb)
        for row in audit_run(scratch / "perf", None, write=False):
            out[f"perf/{row.attempt}"] = _dump(row.verdict)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--compare", type=Path, default=None)
    ap.add_argument("--perf-mb", type=float, default=30.0)
    args = ap.parse_args()
    snap = snapshot(args.perf_mb)
    args.out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    print(f"{len(snap)} verdicts -> {args.out}")
    if args.compare is not None:
        old = json.loads(args.compare.read_text())
        differ = sorted(k for k in old.keys() | snap.keys() if old.get(k) != snap.get(k))
        for k in differ[:40]:
            print("DIFFERS", k, "\n  old:", json.dumps(old.get(k))[:600], "\n  new:", json.dumps(snap.get(k))[:600])
        print(f"{len(differ)} of {len(old.keys() | snap.keys())} verdicts differ")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
