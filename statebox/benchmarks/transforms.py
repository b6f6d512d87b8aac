"""Transformed twins of benchmark items: a video change whose effect on the answer is known.

For any benchmark (real or generated), two transforms change the answer predictably:
- `mirror` (horizontal flip) for questions about left and right: the true option's
  left/right words swap, and the twin's truth is the option that reads so (a "middle" or
  side-free answer does not change: no twin);
- `reverse` (time reversal) for order questions (first, before, after, last, order): a
  two-option question's truth becomes the other option ("Did A happen before B?" yes/no; "which
  lit first?" of two); an option written as a sequence ("A then B then C") becomes the option
  holding the reversed sequence (free-text lists are skipped: "in the order he described
them" is not the frames' order). Only whole-video items whose question names no moment ("the
  scene from 3:39") and, for sequences, no segment bounded by an event ("the steps after he
  opened the box"): reversed, those point elsewhere.

A third kind, `freeze`, serves impossible items (`synthetic/impossible.py:after_cut`): the
video up to a cut, its last frame held to a later time, so nothing after the cut is in it.

`plan_twin(item)` says which transform applies and the twin's truth, or why none changes the
answer (the run prints those reasons). `apply(kind, src, dst)` writes the twin video with
ffmpeg in a subprocess, as the workspace code does (audio kept when mirroring; dropped when
reversing, since a reversed beep track would need its own truth).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statebox.errors import UserError
from statebox.media_input import FFMPEG_INPUT_OPTIONS, file_url, refusal, refused_container
from statebox.schema import Item

LETTERS = "ABCDEFGH"
_LR = re.compile(r"\b(left|right)(most|ward|-hand)?\b", re.I)
_ORDER = re.compile(r"\b(first|before|after|last|order|earlier|later|sequence|then)\b", re.I)
# a moment named in the question ("the scene from 3:39", "at 12 s") moves when the video is reversed
_TIMESTAMP = re.compile(r"\b\d+:\d{2}\b|\b\d+(\.\d+)?\s*(s|sec|secs|seconds?|min|minutes?)\b"
                        r"|\b(first|last|final|opening)\s+(\w+\s+)?(seconds?|minutes?|frames?)\b", re.I)
# a segment named by an event ("the events after the caterpillar entered the pot") is another segment reversed
_ANCHOR = re.compile(r"\b(after|before|until|since|between|within|during|while|once|when)\b", re.I)
_SEQ_SPLIT = re.compile(r"\s*(?:,\s*then\s+|\s+then\s+|\s*->\s*|\s*→\s*|,\s*)", re.I)
TIMEOUT_S = 300


@dataclass(frozen=True)
class TwinPlan:
    kind: str  # mirror | reverse
    target: Any  # the twin's truth, written as the item writes its answer
    why: str


def _swap_lr(text: str) -> str:
    def swap(m: re.Match[str]) -> str:
        word = m.group(1)
        new = "right" if word.lower() == "left" else "left"
        if word[0].isupper():
            new = new.capitalize()
        return new + (m.group(2) or "")

    return _LR.sub(swap, text)


def _truth_index(item: Item) -> int | None:
    target = item.queries[0].target if item.queries and item.queries[0].target is not None else item.target
    return choice_index(item, target)


def choice_index(item: Item, target: Any) -> int | None:
    """The index among the item's choices that `target` names (an index, a letter or the choice's text)."""
    if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < len(item.choices):
        return target
    if isinstance(target, str):
        t = target.strip()
        if len(t) == 1 and t.upper() in LETTERS[: len(item.choices)]:
            return LETTERS.index(t.upper())
        if t in item.choices:
            return item.choices.index(t)
    return None


def _as_written(original: Any, index: int, choices: list[str]) -> Any:
    if isinstance(original, str):
        return LETTERS[index] if len(original.strip()) == 1 else choices[index]
    return index


def _mirror(item: Item) -> TwinPlan | str:
    if not (_LR.search(item.question) or any(_LR.search(c) for c in item.choices)):
        return "no left/right in the question or options"
    if item.choices:
        truth = _truth_index(item)
        if truth is None:
            return "no single true option"
        swapped = _swap_lr(item.choices[truth])
        if swapped == item.choices[truth]:
            return "the true option names no side (mirroring keeps it)"
        if swapped not in item.choices:
            return "the mirrored truth is not an option"
        return TwinPlan("mirror", _as_written(item.target, item.choices.index(swapped), item.choices),
                        "mirrored: left and right swap")
    if isinstance(item.target, str) and _swap_lr(item.target) != item.target:
        return TwinPlan("mirror", _swap_lr(item.target), "mirrored: left and right swap")
    return "the answer names no side"


def _reverse(item: Item) -> TwinPlan | str:
    if not _ORDER.search(item.question):
        return "not an order question"
    if item.is_streaming or len(item.queries) != 1:
        return "a streaming query (reversal moves the moment asked about)"
    if _TIMESTAMP.search(item.question):
        return "the question names a moment (reversal moves it)"
    if _ANCHOR.search(item.question) and not (item.choices and len(item.choices) == 2):
        return "the question names a segment by an event (reversed, it is another segment)"
    if not item.choices:
        # a free-text list ("in the order he described them", judged by a model) need not follow the frames
        return "a free-text answer (its order need not be the frames' order)"
    truth = _truth_index(item)
    if truth is None:
        return "no single true option"
    if len(item.choices) == 2:
        return TwinPlan("reverse", _as_written(item.target, 1 - truth, item.choices), "time-reversed: the other of two options")
    parts = [p for p in _SEQ_SPLIT.split(item.choices[truth]) if p]
    if len(parts) >= 2:
        for index, choice in enumerate(item.choices):
            if index != truth and [p for p in _SEQ_SPLIT.split(choice) if p] == parts[::-1]:
                return TwinPlan("reverse", _as_written(item.target, index, item.choices), "time-reversed: the sequence reverses")
    return "reversal's answer is not an option"


def plan_twin(item: Item) -> TwinPlan | str:
    """The transform that changes this item's answer predictably, or the reason none does."""
    if item.prompts:  # EOC-Bench boxes/points are drawn at fixed pixels of the last frame: flipped or reversed, they mark another object
        return "no transform changes the answer predictably (its visual prompts would mark another object)"
    mirrored = _mirror(item)
    if isinstance(mirrored, TwinPlan):
        return mirrored
    reversed_ = _reverse(item)
    if isinstance(reversed_, TwinPlan):
        return reversed_
    return f"no transform changes the answer ({mirrored}; {reversed_})"


def twin_item(item: Item, plan: TwinPlan, new_id: str, video: Path) -> Item:
    queries = [q.model_copy(update={"target": plan.target if q.target is not None else None}) for q in item.queries]
    return item.model_copy(update={"id": new_id, "video": str(video), "target": plan.target, "queries": queries,
                                   "evidence": []})


def apply(kind: str, src: Path, dst: Path, cut: float = 0.0, until: float = 0.0) -> Path:
    """Write the transformed video to `dst` (atomically); ffmpeg's own words name a failure.
    `freeze` (impossible `after_cut` items): the video up to `cut` s, its last frame held until `until` s."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.stem + ".part" + dst.suffix)
    if kind == "mirror":
        filters = ["-map", "0:v:0", "-map", "0:a?", "-vf", "hflip", "-c:a", "copy"]
    elif kind == "reverse":
        filters = ["-map", "0:v:0", "-an", "-vf", "reverse"]
    elif kind == "freeze":
        if not 0 < cut < until:
            raise ValueError(f"freeze needs 0 < cut < until, got {cut}, {until}")
        filters = ["-map", "0:v:0", "-an", "-vf",
                   f"trim=end={cut:.3f},setpts=PTS-STARTPTS,tpad=stop_mode=clone:stop_duration={until - cut:.3f}"]
    else:
        raise ValueError(f"unknown transform {kind!r}")
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", *FFMPEG_INPUT_OPTIONS, "-i", file_url(src), *filters, "-c:v", "libx264", "-pix_fmt", "yuv420p",
           "-map_metadata", "-1", "-map_chapters", "-1", "-fflags", "+bitexact", str(tmp)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except FileNotFoundError as exc:
        raise UserError("ffmpeg is not installed; install ffmpeg (apt-get install -y ffmpeg)") from exc
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        container = refused_container(proc.stderr or "")
        if container is not None:
            raise UserError(refusal(src, container))
        raise UserError(f"{src}: the {kind} twin failed: {(proc.stderr or '').strip().splitlines()[-1:] or ['ffmpeg error']}")
    tmp.replace(dst)
    return dst
