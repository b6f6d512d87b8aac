"""Question rendering and answer extraction shared by the frame-looking agents (mllm, video-agent).

The scorers parse the *last* letter or number of a response, so an agent that hands
them a whole justification ("at t=12.5 s the third cube ...") risks being scored on a
timestamp. Both agents therefore ask for a final `ANSWER: ...` line and hand the
scorer only what follows it; the full text stays in the session.

It also holds what both agents take from the workspace's host-written extras (issue 17):
EOC-Bench's marked prompt frame (`marked_image`, placed by the `prompt_frame` option:
`replace_last`, the paper's "uniform frames including the last, the last one marked", `append`
or `only`, the paper's "1f") and EC-Bench's transcript (`transcript_section`, the paper's
with-subtitles condition, only when the policy put `transcript.txt` there).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from string import Formatter
from typing import Any

from statebox.attempt import AgentOptions, AttemptContext
from statebox.agents.vision_client import Image
from statebox.errors import UserError
from statebox.json_text import json_value
from statebox.sandbox import prompt_frame
from statebox.sandbox.workspace import TRANSCRIPT_FILE, open_regular
from statebox.sandbox.workspace import answer_format  # one wording for every agent and instruction.txt
from statebox.schema import Item, Query
from statebox.userfiles import TEMPLATE_MAX_BYTES, read_user_text

ANSWER_LINE = re.compile(r"^\s*\**\s*(?:final\s+)?answer\s*\**\s*[:：]\s*\**\s*(.+?)\s*\**\s*$", re.I | re.M)


def options_block(item: Item) -> str:
    lines = []
    for index, choice in enumerate(item.choices):
        label = chr(ord("A") + index)
        text = choice.strip()
        head = text[:4].lstrip("(").upper()
        lines.append(text if head.startswith(label) and len(head) > 1 and head[1] in ".):" else f"{label}. {text}")
    return "\n".join(lines)


def question_block(item: Item, query: Query) -> str:
    """The question as every frame-looking agent gets it (no file names, no ids)."""
    parts = []
    if query.time is not None:
        parts.append(f"The video ends at the moment the question is asked ({query.time:g} s into the recording); "
                     "answer for that moment.")
    parts.append(f"Question: {item.question.strip()}")
    if item.choices:
        parts.append("Options:\n" + options_block(item))
    parts.append("Answer format: " + answer_format(item))
    return "\n".join(parts)


def template_fields(item: Item, query: Query, **extra: Any) -> dict[str, Any]:
    return {
        "question": item.question.strip(),
        "options": options_block(item),
        "answer_format": answer_format(item),
        "query_time": "" if query.time is None else f"{query.time:g}",
        "question_block": question_block(item, query),
        "visual_prompts": "",  # mllm fills in EOC-Bench's colour sentence when it shows the marked frame
        **extra,
    }


def render_template(path: str, fields: dict[str, Any]) -> str:
    """A user's prompt template: Python str.format fields ({question}, {options}, ...), each a plain name.

    Why plain names only (`_plain_fields`): `str.format` also evaluates a format spec (`{question:>2000000000}` built a
    2 GB string on the host), attribute and index access (`{question.__class__.__mro__}` reached past the text into
    the objects, a traceback where one was missing) and conversions; a template is a file someone handed over."""
    template_path = Path(path)
    if not template_path.exists():
        raise UserError(f"{path}: prompt template not found")
    text = read_user_text(template_path, what="prompt template", max_bytes=TEMPLATE_MAX_BYTES)
    _plain_fields(path, text, fields)
    return text.format(**fields)


def _plain_fields(path: str, text: str, fields: dict[str, Any]) -> None:
    """Refuse, in one line naming the template and the field, any replacement field of `text` that is not one of
    `fields` by its plain name (no format spec, conversion, attribute or index), or text `str.format` cannot read."""
    known = ", ".join(sorted(fields))
    try:
        parsed = list(Formatter().parse(text))
    except ValueError as exc:
        raise UserError(f"{path}: not a valid template ({exc}; a literal brace is written {{{{ or }}}})") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if spec:
            raise UserError(f"{path}: template field {shown} has a format spec; fields are plain names ({known})")
        if conversion:
            raise UserError(f"{path}: template field {shown} has a conversion; fields are plain names ({known})")
        if "." in name or "[" in name:
            raise UserError(f"{path}: template field {shown} uses attribute or index access; fields are plain names ({known})")
        if name not in fields:
            raise UserError(f"{path}: template field {shown} is not a known field ({known})")


def extract_answer(text: str) -> str:
    """What follows the last `ANSWER:` line; else the last non-empty line; else ''."""
    matches = ANSWER_LINE.findall(text or "")
    if matches:
        return matches[-1].strip().strip("*").strip()
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def extract_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's text (fenced or bare); None when there is none."""
    if not text:
        return None
    fenced = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    for candidate in fenced:
        try:
            value = json_value(candidate)
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        try:  # read in place (a slice per brace copied the rest of the reply each time); too deep is no object
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def frame_label(t: float) -> str:
    """The text placed before each image; frames_accounting reads the time back from it."""
    return f"[frame t={t:.3f}s]"


# ------------------------------------------------------------- workspace extras (issue 17)

PROMPT_FRAME_MODES = ("replace_last", "append", "only")
PROMPT_FRAME_MAX_BYTES = 16 * 1024 * 1024
TRANSCRIPT_MAX_CHARS = 200_000  # ~50k tokens: a 30-minute talk's Whisper lines fit; longer ones are cut, said so


def prompt_frame_mode(options: AgentOptions, agent: str) -> str:
    """The `prompt_frame` option (`-o prompt_frame=...`); EOC-Bench's own input is the default.

    `replace_last`: the marked frame takes the place of the last sampled frame, as the paper's
    repo does (N uniform frames including the last, the last replaced by the marked one;
    `--frames 1` is then the paper's "1f"); `append`: the N frames, then the marked one;
    `only`: the marked frame alone (Table 4's "1f", the image-level models' input).
    """
    mode = str(options.extra.get("prompt_frame", "replace_last")).strip().lower()
    if mode not in PROMPT_FRAME_MODES:
        raise UserError(f"{agent}: -o prompt_frame={mode} is not one of {', '.join(PROMPT_FRAME_MODES)}")
    return mode


def marked_image(ctx: AttemptContext, time: float) -> Image | None:
    """The workspace's host-written prompt_frame.png as an image part at `time` (None: no prompts).

    Opened with `open_regular` (no link the sandbox could have planted is followed); a file that
    is missing or not a regular file is treated as absent.
    """
    if not ctx.item.prompts or ctx.workspace is None:
        return None
    try:
        with open_regular(ctx.workspace.path / prompt_frame.PROMPT_FRAME_FILE) as handle:
            encoded = base64.b64encode(handle.read(PROMPT_FRAME_MAX_BYTES)).decode("ascii")
    except OSError:
        return None
    return Image(encoded, "image/png", (float(time),))


def prompt_frame_legend(ctx: AttemptContext, where: str) -> str:
    """The paper's system-prompt sentence: which colour (and kind of mark) is which <object N>."""
    marks = prompt_frame.marks_for(ctx.item.prompts, ctx.policy.media.visual_prompt)
    return prompt_frame.legend(marks, where)


def transcript_section(ctx: AttemptContext) -> str:
    """EC-Bench's transcription section: the workspace's transcript.txt (already cut at the query
    time by the host), only when the policy's `media.transcripts` is on; '' otherwise."""
    if not ctx.policy.media.transcripts or ctx.workspace is None:
        return ""
    try:
        with open_regular(ctx.workspace.path / TRANSCRIPT_FILE) as handle:
            text = handle.read(TRANSCRIPT_MAX_CHARS * 4).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
    if not text:
        return ""
    cut = ""
    if len(text) > TRANSCRIPT_MAX_CHARS:
        text, cut = text[:TRANSCRIPT_MAX_CHARS].rsplit("\n", 1)[0], "\n(transcript cut here: too long)"
    return ("Audio transcription of the video (timestamped speech, up to the moment the video ends):\n"
            f"{text}{cut}")
