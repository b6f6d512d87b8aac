"""The literal hunt: every string literal of the test suite, put where an agent's action stands in each log the auditor
reads fast, judged by both readings (the fast path and `--full`); any difference is a hole in the fast path.

Why the test suite's literals: they are the commands, outputs and claims every rule's tests were written with, so a
trigger that does not cover what its rule fires on shows up as soon as one of them stands where the triggers are the
only reader (a later tool call, after the first action, which is always read). Mutated too (a tab for each space, a
line break or a wrapper before, letters Python's `re.I` folds): the rules read a command's words, the triggers its
bytes. Its first run (2026-11-30) found a command naming the model gateway (`ANTHROPIC_BASE_URL`: no trigger held
the gateway's names), a network tool after an escaped line break (`\\nhost`), words apart by tabs (`pip\\tinstall`),
`set` run by `trap`, and secret values spelled with escaped folding characters; all closed, each a test of its own in
test_fast_path_differential.py / test_session_file_fast_path.py.

`test_literal_hunt.py` runs it in CI; `python tests/audits/literal_hunt.py` runs every placement and prints what
differs (a few minutes on two cores). The same texts and places serve two more checks: `agreement` (one verdict in every
format, an Inspect log another harness wrote among them: test_format_agreement.py) and export_hunt.py (every export
audits to its run folder's verdict).
"""

from __future__ import annotations

import ast
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import test_fast_path_differential as run_folder  # noqa: E402  (the run folders' writers)
import test_session_file_fast_path as cli  # noqa: E402  (the CLIs' files' writers)
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log  # noqa: E402
from inspect_ai.model import (ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser,  # noqa: E402
                              ModelOutput)
from inspect_ai.tool import ToolCall  # noqa: E402

TESTS = HERE.parent
SHORTEST, LONGEST = 3, 3000


def test_suite_literals() -> list[str]:
    """Every string constant of 3 to 3,000 characters in the test suite's Python files, sorted, once each."""
    found: set[str] = set()
    for path in sorted(TESTS.rglob("*.py")):
        try:
            with warnings.catch_warnings():  # a test's own invalid escape is its business, not the harvest's
                warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
                tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        found.update(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str) and SHORTEST <= len(node.value) <= LONGEST)
    return sorted(text for text in found if _writable(text))


def _writable(text: str) -> bool:
    """Whether a log can hold `text` (a lone surrogate, which some tests write on purpose, cannot be UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


Verdicts = Any  # each writer's judge gives its own row shape; only equality is asked
Judge = Callable[[Path, list[str]], tuple[Verdicts, Verdicts]]


def _run_folder(place: str) -> Judge:
    def judge(root: Path, texts: list[str]) -> tuple[Verdicts, Verdicts]:
        return run_folder.both(run_session(root, place, texts))
    return judge


def _claude(rows: Callable[[Any, str], list[dict]], end: Callable[[Any], list[dict]] = cli.answered) -> Judge:
    def judge(root: Path, texts: list[str]) -> tuple[Verdicts, Verdicts]:
        target, items = cli.claude_file(root, lambda c: c.bash("ls -la", "a.txt") + [r for t in texts for r in rows(c, t)] + end(c))
        return cli.both(target, items)
    return judge


def _codex(rows: Callable[[Any, str], list[dict]]) -> Judge:
    def judge(root: Path, texts: list[str]) -> tuple[Verdicts, Verdicts]:
        target, items = cli.codex_file(root, lambda c: c.exec_turn("ls -la", "a.txt") + [r for t in texts for r in rows(c, t)])
        return cli.both(target, items)
    return judge


Turn = run_folder.Turn
# where each text stands in a run folder: a later command, what a tool printed, a path Read opens (each text a turn of
# its own, after the first action, which is always read) -> (the turn holding a text, `run_folder.session`'s options)
RUN_PLACES: dict[str, tuple[Callable[[str], Any], dict[str, Any]]] = {
    "run_command": (lambda s: Turn("x", {"command": s}, "done"), {}),
    "run_command_gateway_only": (lambda s: Turn("x", {"command": s}, "done", in_events=False), {}),
    "run_command_responses": (lambda s: Turn("x", {"command": s}, "done"), {"fmt": "responses"}),
    # an OpenAI call's arguments are JSON inside the reply's JSON, escaped as the model likes: the gateway log alone
    "run_command_responses_gateway_only": (lambda s: Turn("x", {"command": s}, "done", in_events=False), {"fmt": "responses"}),
    "run_command_chat_gateway_only": (lambda s: Turn("x", {"command": s}, "done", in_events=False), {"fmt": "chat"}),
    "run_command_events_only": (lambda s: Turn("x", {"command": s}, "done", in_gateway=False), {}),
    "run_output": (lambda s: Turn("x", {"command": "sh /tmp/look.sh"}, s), {}),
    "run_output_gateway_only": (lambda s: Turn("x", {"command": "sh /tmp/look.sh"}, s, in_events=False), {}),
    "run_read_gateway_only": (lambda s: Turn("x", {"file_path": s}, "ok", tool="Read", in_events=False), {}),
}


def run_session(root: Path, place: str, texts: list[str], name: str = "a") -> Path:
    """The attempt folder `root/name` of RUN_PLACES' `place` holding `texts`, each a turn of its own after the first
    action."""
    turn, kw = RUN_PLACES[place]
    return run_folder.session(root, [run_folder.honest(0)] + [turn(text) for text in texts], name=name, **kw)


# the same places and the CLIs' files': a later command, what a tool printed, the agent's text
PLACES: dict[str, Judge] = {
    **{name: _run_folder(name) for name in RUN_PLACES},
    "claude_command": _claude(lambda c, s: c.bash(s, "done")),
    "claude_read": _claude(lambda c, s: c.turn("Read", {"file_path": s}, "ok")),
    "claude_output": _claude(lambda c, s: c.bash("sh /tmp/look.sh", s)),
    "claude_text": _claude(lambda c, s: [c.assistant([c.text(s)])] + c.bash("ls", "a.txt")),
    "claude_answer": _claude(lambda c, s: [c.assistant([c.text(s)])], end=lambda c: []),  # the last text is the answer
    "codex_command": _codex(lambda c, s: c.exec_turn(s, "done")),
    "codex_output": _codex(lambda c, s: c.exec_turn("sh /tmp/look.sh", s)),
    "codex_text": _codex(lambda c, s: [c.message("assistant", s), c.event("agent_message", message=s)] + c.exec_turn("ls", "a.txt")),
}
# the few every CI chunk runs for each literal (a command in each format, a path a file tool opens); the others, for the
# flagged ones
FIRST = ("run_command", "run_command_gateway_only", "claude_command", "codex_command", "run_read_gateway_only", "claude_read")
COMMANDS = FIRST[:4] + ("run_command_responses", "run_command_responses_gateway_only")  # where a flagged command's mutations go

MUTATIONS: dict[str, Callable[[str], str]] = {
    "line_break_before": lambda s: "cd /tmp\n" + s,
    "tab_after_a_separator": lambda s: "true;\t" + s,
    "chained": lambda s: "echo start && " + s,
    "upper_case": str.upper,
    "folding_letters": lambda s: s.replace("k", "\u212a").replace("s", "\u017f"),
    "subshell": lambda s: "(" + s + ")",
    "tabs_for_spaces": lambda s: s.replace(" ", "\t"),
    "bash_c": lambda s: "bash -c '" + s.replace("'", "") + "'",
    "doubled_slashes": lambda s: s.replace("/", "//"),
}

BATCH = 25  # texts judged in one session: a finding the fast path misses changes its findings all the same


def differences(texts: list[str], places: tuple[str, ...] | None = None) -> list[tuple[str, str, Verdicts, Verdicts]]:
    """(place, text, fast, full) where the two readings differ: each batch of texts is one session per place, and a
    batch that differs is judged text by text to name the text (where no text alone differs, the batch is named:
    texts that differ only together are a difference too)."""
    out: list[tuple[str, str, Verdicts, Verdicts]] = []
    root = Path(tempfile.mkdtemp(prefix="hunt-"))
    try:
        n = 0
        for name in places or tuple(PLACES):
            for at in range(0, len(texts), BATCH):
                batch = texts[at:at + BATCH]
                n += 1
                fast, full = PLACES[name](root / f"p{n}", batch)
                if fast == full:
                    continue
                alone = []
                for text in batch if len(batch) > 1 else []:
                    n += 1
                    one_fast, one_full = PLACES[name](root / f"p{n}", [text])
                    if one_fast != one_full:
                        alone.append((name, text, one_fast, one_full))
                out.extend(alone or [(name, " | ".join(batch), fast, full)])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


InspectStep = tuple[str, dict[str, Any] | None, str | None]  # (the assistant's text, a bash call's arguments, its output)


def inspect_log(root: Path, steps: list[InspectStep]) -> tuple[Path, dict[str, Any]]:
    """An Inspect log of another harness (not a statebox export), written by inspect_ai itself: one sample whose
    assistant calls Inspect's `bash` tool (`cmd`) after the prompt, a first call, then `steps`, then answers; and
    the items the CLIs' files are audited with (their facts by sample id)."""
    messages: list[Any] = [ChatMessageSystem(content="You are a coding agent."), ChatMessageUser(content=cli.PROMPT)]
    for n, (text, arguments, output) in enumerate([("", {"cmd": "ls -la"}, "a.txt"), *steps, ("ANSWER: 4", None, None)]):
        calls = [ToolCall(id=f"call_{n}", function="bash", arguments=arguments)] if arguments is not None else None
        messages.append(ChatMessageAssistant(content=text, tool_calls=calls))
        if arguments is not None:
            messages.append(ChatMessageTool(content=output or "", tool_call_id=f"call_{n}", function="bash"))
    sample = EvalSample(id=cli.SID, epoch=1, input=cli.PROMPT, target="4", messages=messages,
                        output=ModelOutput.from_content("openai/gpt-5", "ANSWER: 4"))
    root.mkdir(parents=True)
    path = root / "log.json"
    write_eval_log(EvalLog(eval=EvalSpec(created="2027-01-15T08:00:00+00:00", task="video_qa", dataset=EvalDataset(),
                                         model="openai/gpt-5", config=EvalConfig()), status="success", samples=[sample]),
                   str(path), format="json")
    return path, cli.write_items(root, [cli.items_line(cli.SID)])


def _inspect(steps: Callable[[str], list[InspectStep]]) -> Judge:
    """An Inspect log holding the texts (`steps` of each), read in full (an Inspect log has no other reading)."""
    def judge(root: Path, texts: list[str]) -> tuple[Verdicts, Verdicts]:
        target, items = inspect_log(root, [step for text in texts for step in steps(text)])
        rows = cli.judged(target, items, True)
        return rows, rows
    return judge


# The agreement check's places beyond PLACES (no fast path to hunt in them): other harnesses' logs
OTHER_PLACES: dict[str, Judge] = {
    "inspect_command": _inspect(lambda s: [("", {"cmd": s}, "done")]),
    "inspect_output": _inspect(lambda s: [("", {"cmd": "sh /tmp/look.sh"}, s)]),
    "inspect_text": _inspect(lambda s: [(s, None, None), ("", {"cmd": "ls"}, "a.txt")]),
}
EVERY_PLACE: dict[str, Judge] = {**PLACES, **OTHER_PLACES}
# places that hold the same thing in different formats: a text there must get the same verdict in each (`agreement`)
AGREEING: dict[str, tuple[str, ...]] = {
    "command": ("run_command", "claude_command", "codex_command", "inspect_command"),
    "output": ("run_output", "claude_output", "codex_output", "inspect_output"),
    "text": ("claude_text", "codex_text", "inspect_text"),
    "read": ("run_read_gateway_only", "claude_read"),
}
# what the writers' fixtures do not share: the item id (a run folder's attempt.json names `q517`, the CLIs' items
# `vq-item-0042`), so a text naming one is the original name's finding in one format alone
FIXTURE_ITEM_IDS = ("q517", "vq-item-0042")


def _label_and_kinds(verdicts: Verdicts) -> Verdicts:
    """(label, sorted distinct (category, severity)) from any writer's judged shape: a run folder's (label, findings)
    or a file's rows (one session), or the error a reading raised.

    Distinct, not counted: the same command can make a finding more in one format (Claude Code's Bash call carries a
    `description` beside its command, so the call's text and the command's differ and each is quoted in a finding of
    its own). The cost: in a batch, a text whose finding one format misses is hidden where another text of the batch
    makes one of that category and severity in every format; its label and every other kind still show."""
    if isinstance(verdicts, str):
        return verdicts
    if isinstance(verdicts, list):
        if len(verdicts) != 1:
            return f"{len(verdicts)} sessions"
        _, label, findings = verdicts[0]
    else:
        label, findings = verdicts
    return label, tuple(sorted({(category, severity) for category, severity, _ in findings}))


def agreement(texts: list[str], places: tuple[str, ...],
              leave_out: tuple[str, ...] = FIXTURE_ITEM_IDS) -> list[tuple[str, dict[str, Verdicts]]]:
    """(text, each place's full reading) wherever `places` (one of AGREEING's groups) disagree on a text: each batch is
    one session per place, and a batch that disagrees is judged text by text to name the text. A text naming one of
    `leave_out` in any case (the rules read ids case-blind) is left out."""
    texts = [text for text in texts if not any(item in text.lower() for item in leave_out)]
    out: list[tuple[str, dict[str, Verdicts]]] = []
    root = Path(tempfile.mkdtemp(prefix="agree-"))
    n = 0

    def read(place: str, batch: list[str]) -> Verdicts:
        nonlocal n
        n += 1
        return _label_and_kinds(EVERY_PLACE[place](root / f"p{n}", batch)[1])
    try:
        for at in range(0, len(texts), BATCH):
            batch = texts[at:at + BATCH]
            if len({repr(read(place, batch)) for place in places}) == 1:
                continue
            for text in batch:
                each = {place: read(place, [text]) for place in places}
                if len({repr(v) for v in each.values()}) > 1:
                    out.append((text, each))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def flagged_by_full(text: str) -> bool:
    """Whether the full reading flags `text` as a later command of a run folder (what the mutations start from)."""
    root = Path(tempfile.mkdtemp(prefix="hunt-"))
    try:
        folder = run_folder.session(root, [run_folder.honest(0), Turn("x", {"command": text}, "done")])
        return run_folder.judge(folder, False)[0] != "clean"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _main() -> None:
    from multiprocessing import Pool

    literals = test_suite_literals()
    with Pool() as pool:
        flagged = [s for s, bad in zip(literals, pool.map(flagged_by_full, literals, chunksize=32)) if bad]
        texts = list(dict.fromkeys(literals + [mutate(s) for s in flagged for mutate in MUTATIONS.values()]))
        print(f"{len(literals)} literals, {len(flagged)} flagged as a command by --full, {len(texts)} texts in "
              f"{len(PLACES)} places", flush=True)
        batches = [texts[at:at + BATCH] for at in range(0, len(texts), BATCH)]
        found = [row for rows in pool.map(differences, batches) for row in rows]
    for place, text, fast, full in found:
        print(f"{place}: {text[:100]!r}\n  fast {fast}\n  full {full}")
    print(f"{len(found)} differences")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    _main()
