"""What every task family shares: seeding, sizes, the family record, and small helpers."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SIZES = ("tiny", "small", "full")

# The `duration` variant (lengths.py) sets this to a length factor while it regenerates a
# family of `lengths.PLANNED`: the plan keeps its first events and stops where the shorter
# scene ends, or draws more events from `more_events(rng)` to fill the longer one (each
# family's docstring says how). None (the normal suite): no plan looks at it, so the
# suite's bytes do not depend on it.
LENGTH_SCALE: float | None = None


def more_events(rng: np.random.Generator) -> np.random.Generator:
    """An independent stream for the events a longer scene adds: spawned, so `rng` itself (the
    renderer seed and the draws after the plan) continues exactly as in the normal suite."""
    return rng.spawn(1)[0]


def scaled_frames(n_frames: int) -> int:
    """The frame count of a scene LENGTH_SCALE times `n_frames` long."""
    return max(1, round((LENGTH_SCALE or 1.0) * n_frames))


def duration_for(n_frames: int, fps: int) -> float:
    """A duration in seconds that `int(duration * fps)` maps back to exactly `n_frames`."""
    d = n_frames / fps
    return d if int(d * fps) == n_frames else d + 0.5 / fps


def rng_for(seed: int, family: str, index: int, salt: str = "") -> np.random.Generator:
    """An independent, reproducible random stream per (suite seed, family, video index).

    Hashing the family name (rather than using its position in a list) keeps a family's
    videos unchanged when other families are added or left out with --tasks.
    """
    digest = hashlib.sha256(f"{seed}|{family}|{index}|{salt}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def ease(s: float) -> float:
    """Smoothstep 0..1: objects start and stop without jumps."""
    s = min(1.0, max(0.0, s))
    return s * s * (3 - 2 * s)


def lerp(a: float, b: float, s: float) -> float:
    return a + (b - a) * s


@dataclass
class VideoRecord:
    """What one generated video contributes to its family's annotation file."""

    stem: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    layout: str = ""  # a short signature of the sampled layout (duplicate check)


def layout_signature(values: Any) -> str:
    """A hash of rounded layout numbers: two videos with the same signature are the same layout."""
    flat = np.round(np.asarray(values, dtype=np.float64).ravel(), 2)
    return hashlib.sha256(flat.tobytes()).hexdigest()[:16]


class LayoutRejected(Exception):
    """A sampled layout broke a validity rule; the family draws another."""


def angle_deg(a: float) -> float:
    return round(math.degrees(a), 2)


LETTERS = "ABCD"


def vstat_doc(task: str, stem: str, video: str, question: str, answer: Any, choices: list[str] | None = None,
              element: str = "Count", structure: str = "Atomic", challenge: str = "") -> dict[str, Any]:
    """One VSTAT doc: MCQ answers are letters, numeric answers integers, text answers strings."""
    choices = list(choices or [])
    answer_index: int | None = None
    if choices:
        answer_index = choices.index(answer)
        answer = LETTERS[answer_index]
    labels = {"state_element": element, "state_structure": structure, "perceptual_challenge": challenge,
              "source": "Synthetic", "task": task}
    # The taxonomy is written twice: as the `labels` object, and flat with VSTAT's own key
    # names, which the VSTAT loader keeps as item labels (per-label score breakdowns).
    return {
        "id": stem,
        "source_task": task,
        "video_id": stem,
        "video_path": video,
        "question": question,
        "answer": answer,
        "choices": choices,
        "answer_index": answer_index,
        "state_element": element,
        "state_structure": structure,
        "perceptual_challenge": challenge,
        "source": "Synthetic",
        "labels": labels,
    }
