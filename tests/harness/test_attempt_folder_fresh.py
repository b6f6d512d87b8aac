"""`AttemptFolder.fresh`: an attempt to be redone gets an empty folder of its own, whatever stood at its name.

Why: resuming a run folder made or edited by hand, a link at `attempts/<id>` made `shutil.rmtree` raise (a
traceback, found by probe), and following it would have emptied the folder it names. The link or file is removed
itself; what a link named is untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from statebox.attempt_folder import ATTEMPTS_DIR, AttemptFolder


@pytest.mark.parametrize("kind", ["link to a folder", "file", "left by a killed run"])
def test_fresh_gives_an_empty_folder_and_follows_no_link(tmp_path: Path, kind: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("the user's\n")
    folder = AttemptFolder(tmp_path / "run", "oracle-0123456789abcdef")
    folder.path.parent.mkdir(parents=True)
    if kind == "link to a folder":
        folder.path.symlink_to(elsewhere, target_is_directory=True)
    elif kind == "file":
        folder.path.write_text("stray\n")
    else:
        folder.path.mkdir()
        (folder.path / "events.jsonl").write_text("{}\n")
    made = folder.fresh()
    assert made == tmp_path / "run" / ATTEMPTS_DIR / "oracle-0123456789abcdef"
    assert made.is_dir() and not made.is_symlink() and list(made.iterdir()) == []
    assert (elsewhere / "keep.txt").read_text() == "the user's\n"
