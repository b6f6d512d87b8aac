"""The ground-truth tracks the oracle and the measures read are cached per file, not per path.

Why: the cache was keyed by (folder, stem) alone, so a process that read a suite, then saw it regenerated in place
(same folder, same stems, other rows: a new seed) answered from the rows of the files that were replaced."""

from __future__ import annotations

import json
from pathlib import Path

from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.measure import tracks_for
from statebox.schema import Item


def _write_tracks(family_dir: Path, stem: str, ids: list[int]) -> None:
    path = gt.tracks_path(family_dir, stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"frame": 0, "time": 0.0, "id": i, "class": "cup", "box": [0, 0, 4, 4], "amodal_box": None,
             "visible": 1.0, "in_frame": 1.0} for i in ids]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_suite_regenerated_in_place_is_read_again(tmp_path: Path) -> None:
    item = Item(id="x_0000", benchmark="synthetic", video="videos/x_0000.mp4", question="how many?", answer_type="number")
    _write_tracks(tmp_path, "x_0000", [1, 2])
    assert [r.id for r in tracks_for(tmp_path, item)] == [1, 2]
    assert [r.id for r in tracks_for(tmp_path, item)] == [1, 2]  # the second read is the cache's
    _write_tracks(tmp_path, "x_0000", [7, 8, 9])
    assert [r.id for r in tracks_for(tmp_path, item)] == [7, 8, 9]
