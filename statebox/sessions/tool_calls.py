"""One tool call, whatever harness logged it, -> the normalised events of what it *does*.

Why a module of its own: Inspect logs, Harbor's ATIF trajectories and Codex rollouts all record
a tool call as (function name, arguments), with each harness's own names for the same action
(`bash {cmd}`, `bash_command {keystrokes}`, `shell {command: [argv]}`, `exec_command {cmd}`,
`Bash {command}`, `python {code}`, ...). The contamination rules judge actions, never tool names,
so every normaliser maps its calls here: a `tool_call` (the arguments as sent) plus, for shells,
the `shell_command` the shell ran (argv wrappers like `bash -lc '...'` unwrapped: the script is what
the model wrote), for file tools a `file_read` / `file_write` of the path, for web tools a
`network_attempt`. Code tools (`python {code}`) stay a `tool_call`: the auditor reads their code
from the arguments (`audits/events.py:_tool_call_accesses`).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from statebox.json_text import json_value
from statebox.schema import EventKind
from statebox.sessions import EventDraft, clip

# lower-cased tool names; the argument keys that hold what they act on, in order of preference
SHELL_TOOLS = {"bash", "shell", "exec_command", "local_shell", "run_shell", "terminal", "execute", "bash_command",
               "container.exec", "run_command", "shell_command", "execute_bash", "execute_command", "cmd", "sh",
               "run_terminal_cmd", "command", "bash_session", "write_stdin"}
# bash_session (Inspect's stateful shell) types its `input`; Codex's write_stdin types `chars` into a session exec_command
# started (a shell, as a rule)
SHELL_KEYS = ("command", "cmd", "keystrokes", "script", "commands", "input", "chars")
READ_TOOLS = {"read": "file_path", "glob": "path", "grep": "path", "ls": "path", "read_file": "path", "view": "path",
              "cat": "path", "list_dir": "path", "list_directory": "path", "file_search": "query", "open_file": "path"}
WRITE_TOOLS = {"write": "file_path", "edit": "file_path", "multiedit": "file_path", "notebookedit": "notebook_path",
               "write_file": "path", "create_file": "path", "edit_file": "path", "str_replace": "path",
               "apply_patch": "input"}
NETWORK_TOOLS = {"webfetch": "url", "websearch": "query", "web_search": "query", "fetch": "url", "browse": "url",
                 "web_browser": "url", "web_fetch": "url", "http_request": "url"}
_SHELL_PROGRAMS = {"bash", "sh", "zsh", "dash", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh", "/bin/dash",
                   "/usr/bin/env"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
# shlex's own whitespace, and a first word shlex reads as written (no quote or backslash in it)
_PLAIN_FIRST_WORD = re.compile(r"[ \t\r\n]*([^ \t\r\n'\"\\]+)(?:[ \t\r\n]|$)")


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Arguments as a dict: a JSON string is decoded (Codex, OpenAI-style logs); anything else is kept
    under `input`, so nothing the model sent is lost."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json_value(raw)
        except ValueError:
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": raw}
    return {} if raw is None else {"input": raw}


def shell_script(command: Any) -> str:
    """The script a shell call ran: argv lists joined (`["bash", "-lc", "ls"]` -> `ls`), strings as
    they are, a wrapper `bash -lc '...'` unwrapped."""
    if isinstance(command, list):
        argv = [str(a) for a in command]
        if len(argv) >= 3 and argv[0] in _SHELL_PROGRAMS and argv[-2] in ("-c", "-lc"):
            return argv[-1]
        return shlex.join(argv)
    text = str(command)
    first = _PLAIN_FIRST_WORD.match(text)
    if first is not None and first.group(1) not in _SHELL_PROGRAMS:
        # shlex's first word is that one, so no wrapper to unwrap: the text as it is, without splitting all of
        # it in pure Python (a sixth of reading a Codex rollout went there)
        return text
    try:
        argv = shlex.split(text)
    except ValueError:
        return text
    if len(argv) >= 3 and argv[0] in _SHELL_PROGRAMS and argv[-2] in ("-c", "-lc"):
        return argv[-1]
    return text


def tool_call_drafts(name: str, arguments: Any, call_id: str = "", **extra: Any) -> list[EventDraft]:
    """A `tool_call` draft plus the action drafts the call stands for (see the module docstring)."""
    args = parse_arguments(arguments)
    base = {"tool": name, "call_id": call_id, **extra}
    drafts = [EventDraft(EventKind.tool_call, clip(json.dumps(args, ensure_ascii=False, default=str)), {**base, "input": args})]
    key = name.lower().rsplit(".", 1)[-1] if name.lower() not in SHELL_TOOLS else name.lower()
    if key in SHELL_TOOLS or name.lower() in SHELL_TOOLS:
        command = next((args[k] for k in SHELL_KEYS if args.get(k) not in (None, "", [])), None)
        if command is not None:
            drafts.append(EventDraft(EventKind.shell_command, clip(shell_script(command)), base))
    elif key in READ_TOOLS:
        target = str(args.get(READ_TOOLS[key]) or args.get("path") or args.get("file_path") or args.get("pattern") or "")
        if target:
            drafts.append(EventDraft(EventKind.file_read, target, {**base, "path": target, "pattern": args.get("pattern")}))
    elif key in WRITE_TOOLS:
        value = str(args.get(WRITE_TOOLS[key]) or args.get("path") or "")
        targets = _PATCH_FILE.findall(value) if key == "apply_patch" else [value]
        drafts.extend(EventDraft(EventKind.file_write, t.strip(), {**base, "path": t.strip()}) for t in targets if t.strip())
    elif key in NETWORK_TOOLS:
        target = str(args.get(NETWORK_TOOLS[key]) or args.get("url") or args.get("query") or "")
        drafts.append(EventDraft(EventKind.network_attempt, target, {**base, "url": target}))
    return drafts


def output_draft(text: str, call_id: str = "", *, is_error: bool = False, **extra: Any) -> EventDraft:
    """What a tool returned: the rules read it only for what the agent *saw* (a listing, a canary)."""
    return EventDraft(EventKind.tool_output, clip(text), {"call_id": call_id, "is_error": is_error, **extra})
