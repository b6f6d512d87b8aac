"""remove_tree survives any depth, any permission the agent set, and never follows links out."""

from __future__ import annotations

import os
import sys

import pytest

from statebox.sandbox.cleanup import CleanupError, remove_tree


def _deep_tree(root, depth: int) -> None:
    """`depth` nested folders built with dir fds (paths would exceed PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        new = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        if i % 100 == 0:
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=new), "w") as fh:
                fh.write("x")
        os.close(fd)
        fd = new
    os.close(fd)


def test_removes_a_tree_deeper_than_the_recursion_limit(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    depth = max(3000, sys.getrecursionlimit() * 2)
    _deep_tree(root, depth)
    remove_tree(root)
    assert not root.exists()


def test_removes_folders_the_agent_made_unreadable_and_never_follows_links(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    root = tmp_path / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "file").write_text("x")
    (root / "a" / "link-out").symlink_to(outside)
    (root / "link-file").symlink_to(outside / "keep.txt")
    os.mkfifo(root / "fifo")
    (root / "a" / "b").chmod(0)
    (root / "a").chmod(0o100)
    remove_tree(root)
    assert not root.exists()
    assert (outside / "keep.txt").read_text() == "keep"


def test_missing_folder_is_fine_and_a_file_is_removed(tmp_path):
    remove_tree(tmp_path / "nope")
    f = tmp_path / "f"
    f.write_text("x")
    remove_tree(f)
    assert not f.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make an immutable file (chattr)")
def test_failure_is_loud(tmp_path):
    import subprocess

    root = tmp_path / "ws"
    root.mkdir()
    (root / "stuck").write_text("x")
    if subprocess.run(["chattr", "+i", str(root / "stuck")], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this filesystem (printed so CI shows why)")
    try:
        with pytest.raises(CleanupError, match="could not be removed"):
            remove_tree(root)
    finally:
        subprocess.run(["chattr", "-i", str(root / "stuck")])
    remove_tree(root)
