"""The terminal leaderboard: the same numbers as the HTML report, as a rich table that fits.

Why it lays itself out at print time (`Leaderboard.__rich_console__`): a table wider than the
terminal is cut by rich, cell by cell ("100.0-10…"), and a cut number is a wrong number. So the
table is built for the width it gets, never cutting a number:
- the headline metric's name rides under the dataset's name (the second row of each dataset's
  group), not in every score cell;
- a column that says nothing is left out and the caption says why: each of clean-only, voided
  and flagged-as-wrong (`flag=0`: every flagged attempt counted wrong) when it equals the score
  on every row, voided when it equals flag=0 on every row, the audit column when every attempt is
  clean and ok, the CI column when no row has one;
- where the names still do not fit, agent names are abbreviated (`claude-code-scripted` ->
  `ccs`) with a legend under the table; the text columns (audit, vs prior) wrap at spaces,
  and names fold only as a last resort. Numbers never wrap.

The `vs prior` column compares each row with the best prior baseline of its dataset (chance,
query-index prior, blind; `aggregate.add_comparisons`), three-way: `above`, `NOT above`, or
`too few items to tell` where the interval test cannot separate anything at that n; a sweep's
best-of row names the budget it repeats. Every name and label is plain text (no rich markup
read from it) with hidden characters spelt <U+XXXX> (`visible_text`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from operator import attrgetter

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from statebox.report.aggregate import ABOVE, AT_CEILING, NOT_ABOVE, TOO_FEW, AgentDatasetScore, prior_outcome
from statebox.report.attribution import FailureAttribution, outcomes
from statebox.report.visible_text import visible

PRIOR = "prior-name"  # a `vs prior` piece that is the prior's name (abbreviated with the agents)
FLAGGED_COLUMN = "flag=0"  # the flagged-as-wrong score: short, as the table must fit 100 columns
ABBREVIATE_OVER = 10  # agent names longer than this get a short alias when the table does not fit


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


@dataclass
class _Row:
    dataset: str
    agent: str
    score: str
    ci: str
    clean: str
    voided: str
    flagged: str
    n: str
    audit: str
    audit_style: str
    seconds: str
    prior_note: list[tuple[str, str]]  # (text, style) pieces; the style PRIOR stands for the prior's name
    prior_name: str | None


_CLEAN, _VOIDED, _FLAGGED = attrgetter("clean"), attrgetter("voided"), attrgetter("flagged")


def _rows(scores: list[AgentDatasetScore]) -> list[_Row]:
    out = []
    for s in sorted(scores, key=lambda s: (s.dataset, -(s.report.metrics.get(s.headline) or 0.0))):
        metric = s.headline
        ci_m = ((s.report.model_extra or {}).get("ci", {}) or {}).get(metric)
        flags = " ".join(f"{k}:{v}" for k, v in sorted(s.verdict_counts.items()) if k != "clean") or "clean"
        failed = {k: v for k, v in s.status_counts.items() if k != "ok"}
        if failed:
            flags += " " + " ".join(f"{k}:{v}" for k, v in sorted(failed.items()))
        prior = s.extra.get("prior")
        out.append(_Row(
            dataset=s.dataset,
            agent=s.agent,
            score=_pct(s.report.metrics.get(metric)),
            ci=f"{_pct(ci_m[0])}-{_pct(ci_m[1])}" if ci_m else "-",
            clean=_pct(s.clean.metrics.get(metric)) if s.clean else "-",
            voided=_pct(s.voided.metrics.get(metric)),
            flagged=_pct(s.flagged_view.metrics.get(metric)),
            n=str(s.n),
            audit=flags,
            audit_style="" if flags == "clean" else "yellow",
            seconds=f"{s.mean_duration_s:.1f}",
            prior_note=_vs_prior(s),
            prior_name=prior["name"] if prior else None,
        ))
    return out


def _vs_prior(s: AgentDatasetScore) -> list[tuple[str, str]]:
    notes: list[tuple[str, str]] = []
    if s.best_of is not None:
        notes.append((f"best of {len(s.extra.get('budgets', {}))}: {s.best_of.partition('@')[2]}; ", ""))
    if s.is_baseline:
        notes.append(("baseline", "dim"))
        return notes
    prior = s.extra.get("prior")
    outcome = prior_outcome(s)
    if not prior or outcome is None:
        return notes
    value = s.headline_value
    margin = "" if value is None else f"{100 * (value - prior['value']):+.1f} "
    if outcome == ABOVE:
        notes += [(margin, ""), ("above ", "green"), ("", PRIOR)]
    elif outcome == NOT_ABOVE:
        notes += [(margin, ""), ("NOT above ", "bold red"), ("", PRIOR), (f" {_pct(prior['value'])}", "")]
    elif outcome == TOO_FEW:
        notes += [(margin, ""), (f"too few items to tell (n={s.n})", "yellow")]
    elif outcome == AT_CEILING:
        notes += [(margin, ""), ("prior at 100: ", "yellow"), ("", PRIOR)]
    return notes


def _alias(name: str, taken: set[str]) -> str:
    """`claude-code-scripted` -> `ccs`, `mllm@frames=16` -> `mllm@frames=16` (short enough),
    `query-index-prior@fps=2` -> `qip@fps=2`; a number appended on a clash."""
    base, at, rest = name.partition("@")
    parts = [p for p in base.replace("_", "-").split("-") if p]
    short = ("".join(p[0] for p in parts) if len(parts) > 1 else base[:4]) + at + rest
    found, k = short, 2
    while found in taken:
        found, k = f"{short}{k}", k + 1
    return found


NAME_COLUMNS = ("dataset", "agent")
TEXT_COLUMNS = ("audit", "vs prior")  # wrap at spaces
FILL_ORDER = ("agent", "vs prior", "audit", "dataset")  # who gets room first when it is short
MIN_TEXT = 6  # a wrapping column is never narrower: "+50.0", "100.0", "(n=2)" stay whole on one line


def _widths(text: Text | str) -> tuple[int, int]:
    """(longest word, longest line) of a cell, in terminal cells."""
    plain = text.plain if isinstance(text, Text) else text
    lines = plain.split("\n") or [""]
    words = plain.split() or [""]
    return max(cell_len(w) for w in words), max(cell_len(line) for line in lines)


class Leaderboard:
    """The leaderboard as a rich renderable that fits the width it is printed at (module doc)."""

    def __init__(self, scores: list[AgentDatasetScore], title: str = "statebox leaderboard") -> None:
        self.scores = scores
        self.title = title
        self.rows = _rows(scores)

    def _columns(self) -> tuple[list[str], list[str]]:
        """The columns worth showing, and caption notes for the ones left out."""
        rows, notes = self.rows, []
        cols = ["dataset", "agent", "score", "95% CI", "clean", "voided", FLAGGED_COLUMN, "n", "audit", "s/att",
                "vs prior"]
        same = [c for c, get in (("clean", _CLEAN), ("voided", _VOIDED), (FLAGGED_COLUMN, _FLAGGED))
                if rows and all(get(r) == r.score for r in rows)]
        for c in same:
            cols.remove(c)
        if same:
            names = [{"clean": "clean-only", "voided": "voided", FLAGGED_COLUMN: "flagged-as-wrong"}[c] for c in same]
            said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            notes.append(f"{said} {'score equals' if len(names) == 1 else 'scores equal'} the score on every row")
        if "voided" in cols and FLAGGED_COLUMN in cols and all(r.voided == r.flagged for r in rows):
            cols.remove("voided")  # the same numbers twice: keep the stricter view's column
            notes.append(f"voided scores equal {FLAGGED_COLUMN} on every row")
        if FLAGGED_COLUMN in cols:
            notes.append(f"{FLAGGED_COLUMN}: every flagged attempt counted wrong")
        if rows and all(r.audit == "clean" for r in rows):
            cols.remove("audit")
            notes.append("audit: every attempt clean and ok")
        if rows and all(r.ci == "-" for r in rows):
            cols.remove("95% CI")
        if rows and not any(r.prior_note for r in rows):
            cols.remove("vs prior")
        return cols, notes

    def _cells(self, cols: list[str], aliases: dict[str, str]) -> list[list[Text | str] | None]:
        """One list of cells per row, None between datasets (a section line)."""
        metric_of = {s.dataset: s.headline for s in self.scores}
        by_dataset: dict[str, list[_Row]] = defaultdict(list)
        for r in self.rows:
            by_dataset[r.dataset].append(r)
        out: list[list[Text | str] | None] = []
        for dataset, group in by_dataset.items():
            for k, r in enumerate(group):
                if k == 0:  # the dataset's name, its headline metric under it (the next row's cell)
                    label = Text(visible(dataset), style="bold")
                    if len(group) == 1:
                        label.append("\n" + visible(metric_of.get(dataset, "")), style="dim")
                else:
                    label = Text(visible(metric_of.get(dataset, "")) if k == 1 else "", style="dim")
                note = Text()
                for piece, style in r.prior_note:
                    if style == PRIOR:
                        piece, style = aliases.get(r.prior_name or "", r.prior_name or ""), ""
                    note.append(visible(piece), style=style)
                cells: dict[str, Text | str] = {
                    "dataset": label, "agent": Text(visible(aliases.get(r.agent, r.agent))), "score": r.score,
                    "95% CI": r.ci, "clean": r.clean, "voided": r.voided, FLAGGED_COLUMN: r.flagged, "n": r.n,
                    "audit": Text(visible(r.audit), style=r.audit_style), "s/att": r.seconds, "vs prior": note,
                }
                out.append([cells[c] for c in cols])
            out.append(None)
        return out[:-1]

    def _aliases(self) -> dict[str, str]:
        names = sorted({r.agent for r in self.rows} | {r.prior_name for r in self.rows if r.prior_name})
        long = [n for n in names if len(n) > ABBREVIATE_OVER and " " not in n]  # "chance (frequency)" wraps
        taken = set(names) - set(long)
        out = {}
        for name in long:
            out[name] = _alias(name, taken)
            taken.add(out[name])
        return out

    def layout(self, width: int) -> tuple[Table, list[str]]:
        """The table for WIDTH terminal cells, and the legend of abbreviated names (module doc)."""
        cols, notes = self._columns()
        aliases: dict[str, str] = {}
        for attempt in ("full", "aliases", "fold", "tight"):
            # SIMPLE_HEAD without edges: pad, space, pad between columns; "tight": the space only
            pad = 0 if attempt == "tight" else 1
            overhead = (1 + 2 * pad) * (len(cols) - 1)
            if attempt != "full":
                aliases = self._aliases()
            rows = self._cells(cols, aliases)
            need = {c: _widths(c) for c in cols}  # headers count too
            for cells in rows:
                for c, cell in zip(cols, cells or ()):
                    lo, hi = _widths(cell)
                    need[c] = (max(need[c][0], lo), max(need[c][1], hi))
            flexible = [c for c in cols if c in TEXT_COLUMNS or (attempt in ("fold", "tight") and c in NAME_COLUMNS)]
            fixed = sum(need[c][1] for c in cols if c not in flexible)
            if fixed + overhead + sum(need[c][1] for c in flexible) <= width:
                widths = {c: need[c][1] for c in flexible}
                break
            if attempt == "full" and self._aliases():  # shorter names before wrapping
                continue
            room = width - fixed - overhead
            words = {c: max(MIN_TEXT, need[c][0]) for c in flexible}  # the longest word: no word folds
            if sum(min(words[c], need[c][1]) for c in flexible) > room and attempt not in ("fold", "tight"):
                continue
            widths = {c: min(need[c][1], max(MIN_TEXT, _widths(c)[0])) for c in flexible}  # headers whole
            if sum(widths.values()) > room and attempt == "fold":
                continue
            spare = room - sum(widths.values())
            for c in FILL_ORDER:  # first every column up to its longest word, in this order
                if c in widths and spare > 0:
                    grow = min(spare, max(0, min(words[c], need[c][1]) - widths[c]))
                    widths[c] += grow
                    spare -= grow
            while spare > 0:  # then to the column furthest from its one-line width
                c = max(flexible, key=lambda c: need[c][1] - widths[c])
                if need[c][1] - widths[c] <= 0:
                    break
                widths[c] += 1
                spare -= 1
            break
        table = Table(title=self.title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, pad),
                      caption=" · ".join(notes) or None, caption_justify="left")
        for c in cols:
            left = c in TEXT_COLUMNS or c in NAME_COLUMNS
            table.add_column(c, justify="left" if left else "right", no_wrap=c not in widths, overflow="fold",
                             width=widths.get(c))
        for cells in rows:
            if cells is None:
                table.add_section()
            else:
                table.add_row(*cells)
        legend = [f"{short} = {visible(full)}" for full, short in sorted(aliases.items(), key=lambda kv: kv[1])]
        return table, legend

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table, legend = self.layout(options.max_width)
        yield table
        if legend:
            yield Text("names: " + " · ".join(legend), style="dim")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)


def leaderboard_table(scores: list[AgentDatasetScore], title: str = "statebox leaderboard") -> Leaderboard:
    """The leaderboard renderable (it lays itself out for the console width it is printed at)."""
    return Leaderboard(scores, title)


def attribution_table(found: list[FailureAttribution]) -> Table:
    """The report's "first failing step" figures (first epoch) as a terminal table."""
    names = outcomes()
    table = Table(title="first failing step (failure-mode probes, first epoch)", pad_edge=False)
    table.add_column("dataset")
    table.add_column("agent")
    table.add_column("parents", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for a in sorted(found, key=lambda a: (a.dataset, a.agent)):
        counts = a.counts
        total = sum(counts.values())
        table.add_row(Text(visible(a.dataset)), Text(visible(a.agent)), f"{total}/{a.parents}",
                      *(f"{counts.get(n, 0)} ({_pct(counts.get(n, 0) / total) if total else '-'}%)" for n in names))
    return table


def print_leaderboard(scores: list[AgentDatasetScore], console: Console | None = None, title: str = "statebox leaderboard") -> None:
    (console or wide_console()).print(leaderboard_table(scores, title))


PIPED_WIDTH = 100  # output to a file or a pipe, with no COLUMNS: the width the leaderboard is laid out for


def wide_console(stderr: bool = False) -> Console:
    """A terminal's own width (the leaderboard fits itself into it); piped output with no
    COLUMNS would get rich's 80, so it gets PIPED_WIDTH."""
    console = Console(stderr=stderr)
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(stderr=stderr, width=PIPED_WIDTH)
