"""An attempt's events.jsonl as a conversation: user / system / assistant / tool turns.

Why a neutral conversation first: Inspect's messages and ATIF's steps are both "who said
what, which tool was called with what, what came back", and statebox's events say more
(the auditor's derived actions, frame accounting, per-line output). One reading here, two
small mappings in the writers.

The rules (one per event kind):
- `message`: role user / system / developer as such; `agent-note` (the video agent's own notes)
  is the assistant's; anything else (harness notes, the cap marker) a system turn marked
  `[statebox]`.
- `model_text`: assistant text, or reasoning when `data.thinking`; `model_response` with text:
  assistant text; `model_request` with text: the prompt sent (user), except the ReAct loop's
  bookkeeping ("step N", no content).
- `tool_call`: a call on the current assistant turn (id from `data.call_id`/`data.id`, name
  `data.tool`, arguments `data.input`).
- `shell_command` / `file_read` / `file_write` / `network_attempt` carrying the id of a call
  already seen are the auditor's reading of that call and add nothing; without one (scripted
  agents, the tracker) they are the action itself: a call named `bash` / `read_file` /
  `write_file` / `network`, id `<kind>-<seq>`.
- `tool_output`: the result of its call (by id); without an id, of the last call that had no
  id of its own; consecutive pieces for the same call are one result (a scripted agent's
  stdout arrives line by line).
- `final_answer`: an assistant turn holding the answer (`final`); `error`: a system turn;
  `frames`: frame accounting, not conversation (the counts are in the sample's metadata).
A turn's text is capped at `MAX_TURN_CHARS` (the events file itself is capped by the policy).
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

from statebox.attempt_folder import open_attempt_file

MAX_TURN_CHARS = 200_000
_DERIVED = {"shell_command": "bash", "file_read": "read_file", "file_write": "write_file", "network_attempt": "network"}
_ARGUMENT = {"shell_command": "command", "file_read": "path", "file_write": "path", "network_attempt": "url"}
_REACT_STEP = re.compile(r"step \d+")

Role = Literal["system", "user", "assistant", "tool"]
_MESSAGE_ROLES: dict[str, Role] = {"user": "user", "system": "system", "developer": "system"}  # a message event's role -> its turn


@dataclass(slots=True)
class Call:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Turn:
    role: Role
    text: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    call_id: str = ""  # tool turns: the call this answers ("" = an action without a call)
    tool: str = ""  # tool turns: the called function's name
    error: bool = False  # tool turns: the tool reported failure
    final: bool = False  # assistant turns: the attempt's final answer
    seqs: list[int] = field(default_factory=list)  # events.jsonl seq numbers this turn came from
    time: float | None = None  # seconds since the attempt started (its first event's)
    usage: tuple[int, int] | None = None  # (input, output) tokens of the model call, when recorded

    def add_text(self, text: str, sep: str = "\n") -> None:
        if not text:
            return
        if len(self.text) >= MAX_TURN_CHARS:
            return
        joined = f"{self.text}{sep}{text}" if self.text else text
        if len(joined) > MAX_TURN_CHARS:
            joined = joined[:MAX_TURN_CHARS] + "\n[statebox: cut here; the whole output is in events.jsonl]"
        self.text = joined


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The events of an attempt, one JSON object per line; a torn or foreign line is skipped."""
    try:  # through the attempt folder's door: a link or FIFO there is one line, exit 2, never followed or waited on
        handle = io.TextIOWrapper(open_attempt_file(path), encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                yield event


def _call_id(data: dict[str, Any]) -> str:
    value = data.get("call_id") or data.get("id") or ""
    return str(value)


def build_turns(events: Iterator[dict[str, Any]]) -> list[Turn]:
    """The conversation an attempt's events describe (see the module docstring)."""
    return _Builder().feed_all(events)


class _Builder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.call_ids: set[str] = set()
        self.open_call: Call | None = None  # the last call without an id of its own (for id-less outputs)
        self.call_names: dict[str, str] = {}
        self.pending_usage: tuple[int, int] | None = None  # tokens of a model call whose turn has not begun

    def feed_all(self, events: Iterator[dict[str, Any]]) -> list[Turn]:
        for event in events:
            self.feed(event)
        return self.turns

    # ------------------------------------------------------------ helpers
    def _new(self, role: Role, event: dict[str, Any], text: str = "") -> Turn:
        turn = Turn(role=role, time=_time(event))
        turn.add_text(text)
        self._mark(turn, event)
        self.turns.append(turn)
        return turn

    @staticmethod
    def _mark(turn: Turn, event: dict[str, Any]) -> None:
        seq = event.get("seq")
        if isinstance(seq, int):
            turn.seqs.append(seq)

    def _assistant(self, event: dict[str, Any], *, fresh_after_calls: bool = False) -> Turn:
        """The assistant turn to add to: the last one if it is the last turn, else a new one."""
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "assistant" and not last.final and not (fresh_after_calls and last.calls):
            self._mark(last, event)
            turn = last
        else:
            turn = self._new("assistant", event)
        if self.pending_usage is not None and turn.usage is None:
            turn.usage, self.pending_usage = self.pending_usage, None
        return turn

    def _add_call(self, event: dict[str, Any], call: Call) -> None:
        turn = self._assistant(event)
        turn.calls.append(call)
        self.call_ids.add(call.id)
        self.call_names[call.id] = call.name

    # ------------------------------------------------------------ one event
    def feed(self, event: dict[str, Any]) -> None:
        kind = str(event.get("kind", ""))
        text = str(event.get("text") or "")
        raw_data = event.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        if kind == "message":
            role = str(data.get("role", ""))
            if role in _MESSAGE_ROLES:
                self._new(_MESSAGE_ROLES[role], event, text)
            elif role in ("agent-note", "assistant"):
                self._assistant(event, fresh_after_calls=True).add_text(text)
            else:
                self._new("system", event, f"[statebox] {text}" if text else "[statebox]")
        elif kind == "model_text":
            if data.get("thinking"):
                turn = self._assistant(event, fresh_after_calls=True)
                turn.reasoning = f"{turn.reasoning}\n{text}" if turn.reasoning else text
            else:
                self._assistant(event, fresh_after_calls=True).add_text(text)
        elif kind == "model_response":
            if "input_tokens" in data or "output_tokens" in data:
                # the model call's tokens go to the assistant turn it produced (the ReAct loop logs
                # the response without text, then the text and calls as their own events)
                self.pending_usage = (int(data.get("input_tokens") or 0), int(data.get("output_tokens") or 0))
            if text:
                self._assistant(event, fresh_after_calls=True).add_text(text)
        elif kind == "model_request":
            if text and not ("step" in data and _REACT_STEP.fullmatch(text)):
                self._new("user", event, text)
        elif kind == "tool_call":
            call_id = _call_id(data) or f"call-{event.get('seq')}"
            args = data.get("input")
            if not isinstance(args, dict):
                args = {"input": args if args is not None else text}
            self._add_call(event, Call(id=call_id, name=str(data.get("tool") or "tool"), arguments=args))
        elif kind in _DERIVED:
            call_id = _call_id(data)
            if call_id and call_id in self.call_ids:
                return  # the auditor's reading of a call already in the conversation
            value = data.get(_ARGUMENT[kind]) or text
            call = Call(id=call_id or f"{kind}-{event.get('seq')}", name=_DERIVED[kind], arguments={_ARGUMENT[kind]: value})
            self._add_call(event, call)
            if not call_id:
                self.open_call = call
        elif kind == "tool_output":
            self._tool_output(event, text, data)
        elif kind == "final_answer":
            turn = self._new("assistant", event, text)
            turn.final = True
        elif kind == "error":
            self._new("system", event, f"[error] {text}")
        # frames, and kinds this reader does not know, are not conversation

    def _tool_output(self, event: dict[str, Any], text: str, data: dict[str, Any]) -> None:
        call_id = _call_id(data)
        if not call_id and self.open_call is not None:
            call_id = self.open_call.id
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "tool" and last.call_id == call_id:
            last.add_text(text)
            last.error = last.error or bool(data.get("is_error"))
            self._mark(last, event)
            return
        turn = self._new("tool", event, text)
        turn.call_id = call_id if call_id in self.call_ids else ""
        turn.tool = self.call_names.get(call_id, str(data.get("tool") or ""))
        turn.error = bool(data.get("is_error"))


def _time(event: dict[str, Any]) -> float | None:
    value = event.get("time")
    return float(value) if isinstance(value, (int, float)) else None


def seq_ranges(seqs: list[int]) -> list[list[int]]:
    """Event numbers as [first, last] runs ([1, 2, 3, 7] -> [[1, 3], [7, 7]]): a scripted agent's
    output is one event per line, and a turn may hold thousands."""
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and seq == runs[-1][1] + 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def instruction_of(turns: list[Turn]) -> str:
    """The task as the agent was given it: the first user turn."""
    return next((t.text for t in turns if t.role == "user"), "")
