"""Same seed -> byte-identical annotation/ground-truth files and identical decoded frames; new seed -> new layouts."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from statebox.benchmarks.synthetic.suite import load_suite, make_suite
from statebox.benchmarks.synthetic.video import read_audio, read_frames

# one pan family, one cheap family, and every family added for issue 14 (one or two videos each at tiny),
# ec_beeps with its AAC track: FFmpeg's native AAC encoder with the bitexact flag gave the same bytes in
# every run we tried, so the whole file is compared; the decoded samples are compared as well, so a
# future encoder whose bytes drift (padding, metadata) is told apart from a changed sound
FAMILIES = ["cube_count", "morse_light", "streaming_window", "line_crossing", "swing", "lamp_episodes", "cup_drops",
            "ec_bolts", "ec_beeps", "eoc_objects"]


def _digests(root: Path, families: list[str], suffixes: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for family in families:
        for path in sorted((root / family).rglob("*")):
            if path.is_file() and path.name.endswith(suffixes):
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_same_seed_same_bytes_and_frames(tiny_suite: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    make_suite(again, size="tiny", seed=0, tasks=FAMILIES, workers=1)  # other worker count, other order
    text = (".jsonl", ".json")
    first, second = _digests(tiny_suite, FAMILIES, text), _digests(again, FAMILIES, text)
    assert first and first == second
    for family in FAMILIES:
        for video in sorted((tiny_suite / family / "videos").glob("*.mp4")):
            # compare the decoded planes themselves (an RGB conversion would add the reader's own rounding)
            assert video.read_bytes() == (again / family / "videos" / video.name).read_bytes(), video.name
            a = [f for _, f in read_frames(video, "yuv420p")]
            b = [f for _, f in read_frames(again / family / "videos" / video.name, "yuv420p")]
            assert len(a) == len(b) > 0
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), f"{video.name}: decoded frames differ"
            sound_a, rate_a = read_audio(video)
            sound_b, rate_b = read_audio(again / family / "videos" / video.name)
            assert rate_a == rate_b and np.array_equal(sound_a, sound_b), f"{video.name}: decoded audio differs"
            if family == "ec_beeps":
                assert rate_a > 0 and np.abs(sound_a).max() > 0.1, f"{video.name}: no beep in the audio track"


def test_other_seed_other_layouts(tiny_suite: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    make_suite(other, size="tiny", seed=1, tasks=FAMILIES)
    for family in FAMILIES:
        a = (tiny_suite / family / load_suite(tiny_suite).dataset(family).data.name).read_bytes()
        b = (other / family / load_suite(other).dataset(family).data.name).read_bytes()
        assert a != b
        metas_a = {p.name: p.read_text() for p in (tiny_suite / family / "gt").glob("*.meta.json")}
        metas_b = {p.name: p.read_text() for p in (other / family / "gt").glob("*.meta.json")}
        assert all(metas_a[name] != metas_b[name] for name in metas_a)


def test_regenerating_a_family_never_follows_a_link_at_its_folder(tmp_path: Path) -> None:
    """`bench make --out SUITE` regenerates each family it makes whole; a link at a family's folder (a suite folder
    made by hand) made rmtree raise, a traceback (found by probe). The link itself is replaced; what it named is kept."""
    out = tmp_path / "suite"
    make_suite(out, size="tiny", seed=0, tasks=["cube_count"], workers=1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("the user's\n")
    shutil.rmtree(out / "cube_count")
    (out / "cube_count").symlink_to(elsewhere, target_is_directory=True)
    make_suite(out, size="tiny", seed=0, tasks=["cube_count"], workers=1)
    assert (out / "cube_count").is_dir() and not (out / "cube_count").is_symlink()
    assert (elsewhere / "keep.txt").read_text() == "the user's\n" and sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]


def test_render_processes_are_capped_at_the_cores(tmp_path: Path, monkeypatch) -> None:
    """`bench make --workers 5000` asked for a process per video (each with numpy): the pool is capped at the cores and
    the videos; the bytes do not depend on the count (test above)."""
    from statebox.benchmarks.synthetic import suite as suite_module

    asked: list[int] = []
    real = suite_module.ProcessPoolExecutor

    def recording(max_workers: int):
        asked.append(max_workers)
        return real(max_workers=max_workers)

    monkeypatch.setattr(suite_module, "ProcessPoolExecutor", recording)
    # 64, not 5000: past any CI machine's cores, and few enough processes should the cap ever go (Python 3.11's pool
    # starts all of them at once: the uncapped 5000 took this machine's memory before the test timed out)
    make_suite(tmp_path / "s", size="tiny", seed=0, tasks=["cube_count"], workers=64)
    assert all(n <= (os.cpu_count() or 1) for n in asked)  # none asked at all on one core: no pool


def test_the_progress_display_shows_as_many_slots_as_render(monkeypatch) -> None:
    """`bench make` and the demo size their progress display with the cap the pool uses: one function
    (`render_workers`), so the two cannot drift apart (they were written twice before)."""
    from statebox.benchmarks.synthetic import suite as suite_module

    monkeypatch.setattr(suite_module.os, "cpu_count", lambda: 4)
    assert suite_module.render_workers(64) == 4
    assert suite_module.render_workers(64, videos=3) == 3
    assert suite_module.render_workers(None) == suite_module.default_workers() == 2
    assert suite_module.render_workers(1, videos=0) == 1
