"""An agent that answers from memory, for the counterfactual checks (tests only; not registered).

It holds a hard-coded table: item id -> the answer it "remembers". Given a table built from
the source items' answers and applied to their counterfactual twins as well (perfect
recognition of the scene, as a model that saw the benchmark would have), it answers each
twin with the source's answer: exactly what `harness/trust.py` must flag as `memorised`.
It never looks at the video, so it needs no sandbox. Tests register it with
`monkeypatch.setitem(statebox.agents.base.AGENT_MODULES, "memoriser", "statebox.testing.memoriser:MemoriserAgent")`
and give the table as the option `extra.answers` (JSON text or a dict).
"""

from __future__ import annotations

import json

from statebox.agents.baselines import HostAgent
from statebox.attempt import AttemptContext


class MemoriserAgent(HostAgent):
    name = "memoriser"

    def answer(self, ctx: AttemptContext) -> str:
        table = ctx.options.extra.get("answers") or {}
        if isinstance(table, str):
            table = json.loads(table)
        if ctx.item.id not in table:
            raise ValueError(f"nothing remembered for {ctx.item.id}")
        return str(table[ctx.item.id])
