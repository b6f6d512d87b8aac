"""The words that betray self-recognition: benchmarks, their papers and their source datasets.

Why a registry and not a word list: the same benchmark is spelled many ways by a
model ("EPIC-KITCHENS", "Epic Kitchens", "epic_kitchens-100"), so every entry is
compiled into a pattern that tolerates case, spaces, hyphens and underscores
between its parts. Terms that are ordinary English words ("coin", "kinetics")
are deliberately absent: a rule that fires on ordinary work is worse than none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from statebox.audits.fastmatch import compile_any


@dataclass(frozen=True)
class LexiconEntry:
    """One thing a model should not know it is looking at."""

    name: str  # canonical spelling, used in findings
    kind: str  # "benchmark" | "dataset" | "paper" | "tool" | "source"
    aliases: tuple[str, ...]  # spellings; parts separated by spaces/hyphens/underscores


# The benchmarks statebox runs, their papers, and the public datasets their clips come from.
REGISTRY: tuple[LexiconEntry, ...] = (
    LexiconEntry("VSTAT", "benchmark", ("VSTAT", "Visual State Tracking benchmark")),
    LexiconEntry("VCBench", "benchmark", ("VCBench", "VC-Bench", "Video Counting Bench")),
    LexiconEntry("EC-Bench", "benchmark", ("EC-Bench", "ECBench")),
    LexiconEntry("CP-Bench", "benchmark", ("CP-Bench", "CPBench")),
    LexiconEntry("EOC-Bench", "benchmark", ("EOC-Bench", "EOCBench")),
    LexiconEntry("VSI-Bench", "benchmark", ("VSI-Bench", "VSIBench", "nyu-visionx")),
    LexiconEntry("LVBench", "benchmark", ("LVBench", "LV-Bench")),
    LexiconEntry("MVBench", "benchmark", ("MVBench",)),
    LexiconEntry("Video-MME", "benchmark", ("Video-MME", "VideoMME")),
    LexiconEntry("EgoSchema", "benchmark", ("EgoSchema",)),
    LexiconEntry("NExT-QA", "benchmark", ("NExT-QA", "NExTQA")),
    LexiconEntry("Perception Test", "benchmark", ("Perception Test benchmark",)),
    LexiconEntry("ScanNet", "dataset", ("ScanNet", "ScanNet++", "ScanNetV2")),
    LexiconEntry("ARKitScenes", "dataset", ("ARKitScenes",)),
    LexiconEntry("RoomTour3D", "dataset", ("RoomTour3D", "Room Tour 3D")),
    LexiconEntry("Ego4D", "dataset", ("Ego4D", "Ego 4D")),
    LexiconEntry("Ego-Exo4D", "dataset", ("Ego-Exo4D", "EgoExo4D", "Ego Exo 4D")),
    LexiconEntry("EPIC-KITCHENS", "dataset", ("EPIC-KITCHENS", "EPIC KITCHENS", "EpicKitchens")),
    LexiconEntry("Charades-Ego", "dataset", ("Charades-Ego", "Charades STA")),
    LexiconEntry("HowTo100M", "dataset", ("HowTo100M",)),
    LexiconEntry("YouCook2", "dataset", ("YouCook2", "YouCookII")),
    LexiconEntry("Something-Something", "dataset", ("Something-Something", "SomethingSomething v2", "SSv2 dataset")),
    LexiconEntry("ActivityNet", "dataset", ("ActivityNet",)),
    LexiconEntry("lmms-eval", "tool", ("lmms-eval", "lmms_eval", "lmmseval")),
    LexiconEntry("Benchmarking Visual State Tracking", "paper",
                 ("Benchmarking Visual State Tracking", "Visual State Tracking in Multimodal Video Understanding")),
    LexiconEntry("Counting Bench paper", "paper", ("Video Counting Benchmark",)),
)

# YouTube references: a watch URL, a short link, or a `yt-dlp` fetch name the clip's source.
YOUTUBE_PATTERN = r"(?:youtube\.com/(?:watch\?v=|shorts/|embed/)[\w-]{6,}|youtu\.be/[\w-]{6,}|\byt-dlp\b|\byoutube-dl\b)"

# Hyphen first, no backslashes: the same text is a valid class in Python, RE2 and POSIX ERE (grep -E).
_SEPARATOR = r"[-_ ]*"


def alias_pattern(alias: str) -> str:
    """`EPIC-KITCHENS` -> `epic[-_ ]*kitchens`: tolerant of case and of what joins the parts.

    Camel-case and letter/digit boundaries count as part boundaries too, so
    `EpicKitchens` also matches `epic kitchens`, and `Ego4D` matches `ego-4d`.
    """
    parts: list[str] = []
    for chunk in re.split(r"[\s_\-]+", alias.strip()):
        if not chunk:
            continue
        # split "EpicKitchens" -> Epic, Kitchens ; "Ego4D" -> Ego, 4D ; keep "++" attached
        pieces = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+[A-Za-z]*|\+\+|[^\sA-Za-z\d]", chunk)
        parts.extend(pieces or [chunk])
    body = _SEPARATOR.join(re.escape(p.lower()) for p in parts)
    return rf"(?<![a-z0-9]){body}(?![a-z0-9])"


def lexicon_regex(entries: tuple[LexiconEntry, ...] = REGISTRY) -> re.Pattern[str]:
    """One case-insensitive regex over every alias; the named group `lex_N` says which entry."""
    groups = []
    for index, entry in enumerate(entries):
        alts = "|".join(alias_pattern(a) for a in sorted(entry.aliases, key=len, reverse=True))
        groups.append(f"(?P<lex_{index}>{alts})")
    return re.compile("|".join(groups), re.IGNORECASE)


LEXICON_RE = lexicon_regex()
YOUTUBE_RE = re.compile(YOUTUBE_PATTERN, re.IGNORECASE)


_FAST = None


def _fast_precheck(text: str) -> bool:
    """RE2 over the lexicon first: the Python alternation is slow and almost never matches."""
    global _FAST
    if _FAST is None:
        _FAST = compile_any(trigger_patterns())
    return _FAST.search(text.encode("utf-8", "replace")) is not None


def may_name_terms(text: str) -> bool:
    """False only where `find_terms(text)` is empty (its own precheck). Its patterns have no assertion or
    anchor, so a text that holds a match holds it inside any longer text: the rules ask once per session."""
    return bool(text) and _fast_precheck(text)


def find_terms(text: str) -> list[tuple[str, str, int]]:
    """(canonical name, matched text, offset) for every benchmark/dataset/paper named in `text`."""
    hits: list[tuple[str, str, int]] = []
    if not text or not _fast_precheck(text):
        return hits
    for match in LEXICON_RE.finditer(text):
        group = match.lastgroup or ""
        entry = REGISTRY[int(group.split("_")[1])] if group.startswith("lex_") else None
        hits.append((entry.name if entry else match.group(0), match.group(0), match.start()))
    for match in YOUTUBE_RE.finditer(text):
        hits.append(("YouTube", match.group(0), match.start()))
    return hits


def trigger_patterns() -> list[str]:
    """The lexicon as prefilter patterns (RE2/grep-compatible: no lookbehind)."""
    out = []
    for entry in REGISTRY:
        for alias in entry.aliases:
            out.append(re.sub(r"\(\?<!\[a-z0-9\]\)|\(\?!\[a-z0-9\]\)", "", alias_pattern(alias)))
    out.append(YOUTUBE_PATTERN.replace(r"\b", "").replace("(?:", "("))
    return out


# Values too ordinary to search for: a file called `video.mp4` or an item `0001` identifies nothing.
_GENERIC = {"video", "input", "clip", "sample", "test", "movie", "output", "answer", "question", "frame", "frames", "default"}


def usable_secret(value: str) -> bool:
    """Only distinctive values can be searched for: `0001` or `video` would match honest text."""
    v = value.strip().lower()
    if len(v) < 4 or v in _GENERIC or v.split(".")[0] in _GENERIC:
        return False
    if v.isdigit() and len(v) < 6:
        return False
    return True
