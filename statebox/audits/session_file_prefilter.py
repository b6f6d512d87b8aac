"""Candidate lines of the CLIs' own session files (Claude Code's, Codex's rollouts): the run folder's fast path, for
the files a user hands over.

Why: a `~/.claude/projects` folder was parsed line by line, every tool call read as shell or code and every event
judged, 7x slower per MB than a statebox run folder (2.9 s against 0.4 s CPU per 100 MB on the perf corpus, in a
fresh process), while nine lines in ten hold nothing any rule looks for. The same reasoning as `events.jsonl`'s
prefilter: a line whose bytes hold none of the static or output triggers (`rules.static_triggers`,
`rules.OUTPUT_TRIGGERS`) and none of the session's secret values (`--items`: original name, item id, decoys) makes no
finding by what it holds, so its tool calls, tool results and model text need not become events. What a line means *beyond* its text is kept exactly:

- every line that is not plain conversation (a prompt, a reminder, `isMeta`, an attachment, the system prompt
  snapshot, an API error, provider-run or unknown blocks, a line mixing text and tool blocks, bookkeeping, Codex's
  session metadata, compaction summaries and `task_complete`) is read as usual: prompts excuse echoes, and none of
  them is left to a pattern (each format's `quiet_line` decides from the parsed line, not its bytes);
- a Codex line naming `spawn_agent` or `agent_id` is read: the subagents a session started are told from those
  calls and their answers (`cli_session_files.spawned_agents`), and one whose rollout is missing flags the session;
- the first line of tool calls is read (`AuditLog.given_prompts`: only prompts before the first action excuse), and
  so is every line of tool calls holding what a program builds a name by at run time (`rules.FOLD_TRIGGERS`);
- the final answer (Claude Code: the last assistant text after the last tool event; Codex: `task_complete`, else the
  last assistant message) is followed through every line, read or not;
- a line holding a JSON escape no writer of these files uses (`\\uXXXX` of a printable or non-ASCII character, or of a
  control character they write short, `\\/`) is read: the triggers are written for the bytes Claude Code, Codex and
  statebox write, where such text is plain; so is a line holding a 19-digit number, which orjson and json may read
  apart (the full reading asks json), a blank Python's `\\s` takes and no shell does (`rules.ODD_BLANK`, `\\f`), or a
  file tool's path holding an escape (`rules.ESCAPED_PATH_INPUT`: the tool opens `/workspace\\n1` as one name).

Each line not read as a candidate is still parsed (orjson, ~0.17 s per 100 MB), to be told by its shape; what is
skipped is turning it into events, reading its commands, deriving places and judging. `statebox audit --full` reads
every line, the reading this one is tested against (tests/audits/test_session_file_fast_path.py).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Protocol

import orjson

from statebox.audits.events import Prefilter
from statebox.audits.fastmatch import Literals, compile_any, lines_matching_within, match_bounds, matching_lines
from statebox.audits.rules import ESCAPED_PATH_INPUT, FOLD_TRIGGERS, FORM_FEED
from statebox.json_text import json_value
from statebox.schema import ACTION_KINDS, EventKind
from statebox.sessions import QUIET_CALLS, QUIET_NOTHING, QUIET_RESULTS, QUIET_TEXT, EventDraft, parse_json_line
from statebox.sessions import claude_session, codex_rollout

# a `\u` escape but of a control character JSON writers spell so (U+0000-U+001F but for the five they write short:
# `\b \t \n \f \r`), or an escaped `/`: text no writer of these files spells so (an escaped backslash before a `u`
# matches too, and case is ignored: more read, never less)
ODD_ESCAPE = r"\\u([^0\n]|0[^0\n]|00[^01\n]|000[89acd])|\\/"
# a number of 19 digits or more: orjson may read it otherwise than json, and the full reading reads such a line with
# json (`json_text.line_loads`), which may also refuse what orjson reads (nesting past its recursion limit)
LONG_DIGITS = r"[0-9]{19}"
# what tells the subagents a Codex session started (`cli_session_files.SPAWN_TOOL` calls and their answers)
CODEX_SPAWN_WORDS = ("spawn_agent", "agent_id")


def candidate_lines(data: bytes, prefilter: Prefilter, secret: Literals | None, words: tuple[str, ...] = ()) -> set[int]:
    """1-based numbers of the lines of `data` read as candidates: a static or output trigger (`rules.ODD_BLANK` among
    them), a secret value, an odd escape, a form feed (`\\f`), a file tool's path holding an escape
    (`rules.ESCAPED_PATH_INPUT`), a number of 19 digits, one of `words` (any case). Searched in one RE2 pass."""
    extra = (ODD_ESCAPE, LONG_DIGITS, FORM_FEED, ESCAPED_PATH_INPUT, *(re.escape(word) for word in words))
    lines = lines_matching_within(prefilter.static_and_output(extra), data)
    if lines is None:  # a match across a newline: each pattern alone (`fastmatch.lines_matching_within` says why)
        lines = matching_lines(prefilter.static, data) | matching_lines(compile_any(list(extra)), data)
        if prefilter.output is not None:
            lines |= matching_lines(prefilter.output, data)
    if secret is not None:
        lines |= secret.lines(data)
    return lines


_FOLDS: Any = None


def _builds_names(line: bytes) -> bool:
    """Whether a line of tool calls holds what a program builds a name by (`rules.FOLD_TRIGGERS`): the rules read its
    programs folded (`runtime_names`), where `'e' + 'nv'` is `env`, which no trigger over the bytes can see."""
    global _FOLDS
    if _FOLDS is None:
        _FOLDS = match_bounds(compile_any(FOLD_TRIGGERS))
    return bool(_FOLDS(line, 0, len(line))[0] >= 0)


class _Normaliser(Protocol):
    """What both CLIs' normalisers are: a line's drafts (`feed`), and the final answer's text so far."""

    last_text: tuple[int, str] | None

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]: ...


def claude_drafts(data: bytes, candidates: set[int]) -> list[tuple[int, EventDraft]]:
    """`claude_session.parse_lines` of the file `data`, but the drafts of quiet lines outside `candidates`, other
    than the first line of tool calls. Line numbers and the final answer are those of the full reading."""
    norm = claude_session.ClaudeSessionNormaliser()
    out, pending = _drafts(data, candidates, norm, claude_session.quiet_line,
                           lambda obj: not obj.get("isSidechain"))  # as `feed` resets: a tool event of the agent's own
    _settle(norm, data, pending)
    if norm.last_text is not None:
        line_no, text = norm.last_text
        out.append((line_no, EventDraft(EventKind.final_answer, text, {"from": "last assistant text"})))
    return out


def codex_drafts(data: bytes, candidates: set[int]) -> list[tuple[int, EventDraft]]:
    """`codex_rollout.parse_lines` of the rollout `data`, read as `claude_drafts` reads (a tool event leaves Codex's
    final answer as it was, and a `task_complete` says it: then the last message is not asked)."""
    norm = codex_rollout.RolloutNormaliser()
    out, pending = _drafts(data, candidates, norm, codex_rollout.quiet_line, lambda obj: False)
    if not norm.answered:
        _settle(norm, data, pending)
        if norm.last_text is not None:
            line_no, text = norm.last_text
            out.append((line_no, EventDraft(EventKind.final_answer, text, {"from": "last assistant message"})))
    return out


_UNCHANGED = (0, "")  # put in `last_text` before a line is fed, to tell whether the line set or cleared it


def _drafts(data: bytes, candidates: set[int], norm: _Normaliser, quiet_line: Callable[[dict[str, Any]], str | None],
            resets: Callable[[dict[str, Any]], bool]) -> tuple[list[tuple[int, EventDraft]], list[tuple[int, int, int]]]:
    """Every line of `data` as the format's normaliser reads it, but for the quiet lines outside `candidates`: a line
    of text is put by (`pending`, settled by `_settle`), a line of tool events only clears the final answer where
    `resets` says the format's `feed` would, a line of nothing is passed over. The first line of tool calls is read
    (prompts after it excuse nothing: `AuditLog.given_prompts`).

    Why text lines wait: a text line's only part in the verdict is the final answer, the text of the last one that
    holds text and follows every line that cleared it. `feed` never reads the answer so far, it only sets or clears
    it, so a text line is read (at the end) only while nothing later set or cleared it: most never are.

    A line outside `candidates` holds no number of 19 digits (LONG_DIGITS), so orjson's reading of it is the full
    reading's (`json_text.line_loads` reads a line with orjson unless the line holds one), without asking the whole
    file for such numbers first (a tenth of the reading)."""
    out: list[tuple[int, EventDraft]] = []
    pending: list[tuple[int, int, int]] = []  # (line, start, end) of the text lines since the answer was last set
    acted = False
    find = data.find
    start, size, n = 0, len(data), 0
    while start < size:
        end = find(b"\n", start)
        if end < 0:
            end = size
        n += 1
        line_start, raw = start, data[start:end]
        start = end + 1
        obj: Any = None
        if n not in candidates:
            stripped = raw.strip()
            if not stripped:
                continue
            try:
                obj = orjson.loads(stripped)
            except orjson.JSONDecodeError:
                obj = None  # read as the full reading reads it (an unparsed message, or bytes it decodes otherwise)
            else:
                if not isinstance(obj, dict):
                    continue
                quiet = quiet_line(obj)
                if quiet == QUIET_NOTHING:
                    continue
                if quiet == QUIET_TEXT:
                    pending.append((n, line_start, end))
                    continue
                if quiet == QUIET_RESULTS or (quiet == QUIET_CALLS and acted and not _builds_names(raw)):
                    if resets(obj):
                        norm.last_text = None
                        pending.clear()
                    continue
        before, norm.last_text = norm.last_text, _UNCHANGED
        if obj is None:
            drafts = parse_json_line(n, raw.decode("utf-8", "replace"), norm.feed, json_value)
        else:
            drafts = [(n, d) for d in norm.feed(obj, n)]
        if norm.last_text is _UNCHANGED:
            norm.last_text = before
        else:
            pending.clear()  # this line set or cleared the answer: the text lines before it are not it
        out.extend(drafts)
        acted = acted or any(d.kind in ACTION_KINDS for _, d in drafts)
    return out, pending


def _settle(norm: _Normaliser, data: bytes, pending: list[tuple[int, int, int]]) -> None:
    """The final answer after the text lines left `pending`: the last of them that holds an answer's text (fed from
    the last back: each one only sets the answer or leaves it), else the answer as it was."""
    kept = norm.last_text
    for n, start, end in reversed(pending):
        norm.last_text = _UNCHANGED
        parse_json_line(n, data[start:end].decode("utf-8", "replace"), norm.feed, json_value)
        if norm.last_text is not _UNCHANGED:
            return
    norm.last_text = kept
