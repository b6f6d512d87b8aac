"""What every task family shares: seeding, sizes, the family record, and small helpers."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SIZES = ("tiny", "small", "full")


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
