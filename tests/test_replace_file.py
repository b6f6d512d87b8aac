"""`statebox.replace_file`: whole or nothing, and never through a link planted beside the target.

Why: every whole-file write statebox makes into a folder it may not have made alone (a verdict into a handed run
folder, an audit page, an Inspect copy with --write-scores, an ATIF export, an attempt's JSON) goes through it.
The old fixed temporary names (`verdict.json.tmp`, `.page.html.tmp`, `X.tmp`) were opened for writing through
whatever stood there; these checks fail on that way of writing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from statebox.attempt_folder import write_json
from statebox.replace_file import FILE_MODE, replace_file, replace_text, replacing, replacing_by_name


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the user's own file\n")
    return victim


OLD_TEMPORARY_NAMES = ["{name}.tmp", ".{name}.tmp", "{stem}.tmp"]


@pytest.mark.parametrize("writer", ["replace_file", "replace_text", "write_json"])
def test_no_write_goes_through_a_link_at_any_name_beside_the_target(tmp_path, writer):
    victim = _victim(tmp_path)
    target = tmp_path / "run" / "verdict.json"
    target.parent.mkdir()
    for pattern in OLD_TEMPORARY_NAMES:
        (target.parent / pattern.format(name=target.name, stem=target.stem)).symlink_to(victim)
    {"replace_file": lambda: replace_file(target, b'{"a": 1}'), "replace_text": lambda: replace_text(target, '{"a": 1}'),
     "write_json": lambda: write_json(target, {"a": 1})}[writer]()
    assert victim.read_text() == "the user's own file\n"
    assert target.read_text().replace(" ", "").replace("\n", "") == '{"a":1}'
    assert not target.is_symlink()


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = _victim(tmp_path)
    target = tmp_path / "page.html"
    target.symlink_to(victim)
    replace_text(target, "<p>new</p>")
    assert victim.read_text() == "the user's own file\n"
    assert not target.is_symlink() and target.read_text() == "<p>new</p>"


def test_an_error_mid_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "verdict.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with replacing(target) as handle:
            handle.write(b"half")
            raise RuntimeError("disk full, say")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdict.json"]


def test_the_file_gets_the_mode_open_would_give_it(tmp_path):
    reference = tmp_path / "by_open"
    reference.write_text("x")
    replace_text(tmp_path / "by_replace", "x")
    mode = stat.S_IMODE((tmp_path / "by_replace").stat().st_mode)
    assert mode == stat.S_IMODE(reference.stat().st_mode) == FILE_MODE


def test_a_name_to_write_is_fresh_each_time_keeps_the_suffix_and_replaces_the_target(tmp_path):
    """`replacing_by_name` (inspect_ai's writer must be handed a name): a fresh empty file each time, never the link
    planted at the old name; renamed over the target on a clean exit, removed on an error."""
    victim = _victim(tmp_path)
    target = tmp_path / "scored.eval"
    (tmp_path / ".scored.eval.tmp.eval").symlink_to(victim)
    with replacing_by_name(target) as first:
        with replacing_by_name(target) as second:
            assert first != second and first.endswith(".eval") and Path(first).parent == tmp_path
            for name in (first, second):
                assert stat.S_ISREG(os.lstat(name).st_mode) and os.path.getsize(name) == 0
            Path(second).write_text("second")
        Path(first).write_text("first")
    assert target.read_text() == "first" and victim.read_text() == "the user's own file\n"
    with pytest.raises(RuntimeError):
        with replacing_by_name(target) as name:
            Path(name).write_text("half")
            raise RuntimeError("the writer failed")
    assert target.read_text() == "first" and not Path(name).exists()


def _special(tmp_path: Path, kind: str) -> Path:
    """A target that is no regular file: what a user names by mistake (`--html /dev/null`, `--out /dev/stdout`) or
    a handed-over folder holds. Links point at things outside the test's folder only where they exist everywhere
    (/dev/null), and the refusal leaves them as they were."""
    target = tmp_path / "out" / "page.html"
    target.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "socket":
        import socket

        here = os.getcwd()
        os.chdir(target.parent)  # a socket's path is capped at 108 bytes: bound by its short relative name
        try:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(target.name)
            sock.close()
        finally:
            os.chdir(here)
    elif kind == "link to a fifo":
        os.mkfifo(tmp_path / "fifo")
        target.symlink_to(tmp_path / "fifo")
    elif kind == "link to a folder":
        (tmp_path / "folder").mkdir()
        target.symlink_to(tmp_path / "folder")
    elif kind == "link to /dev/null":
        target.symlink_to("/dev/null")
    elif kind == "link to /dev/stdout":  # under pytest, the process's output is a regular file
        target.symlink_to("/dev/stdout")
    elif kind == "link to /proc/self/fd/1":
        target.symlink_to("/proc/self/fd/1")
    return target


SPECIAL_TARGETS = ["fifo", "folder", "socket", "link to a fifo", "link to a folder", "link to /dev/null",
                   "link to /dev/stdout", "link to /proc/self/fd/1"]


@pytest.mark.parametrize("kind", SPECIAL_TARGETS)
@pytest.mark.parametrize("writer", ["replace_file", "replacing_by_name"])
def test_a_device_fifo_socket_or_folder_at_the_target_is_refused_and_left_standing(tmp_path, kind, writer):
    """Run as root, `statebox audit X --html /dev/full` renamed its page over the device node: /dev/full became a
    regular file holding the page (found by probe; `/dev/null` or `/dev/stdout` would go the same way). statebox
    replaces a regular file, a link to one, or a dangling link (never followed); anything else is one error line,
    with nothing written and no temporary left."""
    from statebox.errors import UserError

    target = _special(tmp_path, kind)
    before = os.lstat(target)
    with pytest.raises(UserError, match="not a regular file") as caught:
        if writer == "replace_file":
            replace_file(target, b"<p>page</p>")
        else:
            with replacing_by_name(target) as name:
                Path(name).write_bytes(b"<p>page</p>")
    assert str(target) in str(caught.value)
    after = os.lstat(target)
    assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (before.st_ino, stat.S_IFMT(before.st_mode))
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert os.readlink("/dev/stdout") == "/proc/self/fd/1"


def test_a_path_through_proc_is_refused_where_it_stands(tmp_path):
    """`/dev/fd/1` goes through the link `/dev/fd` into /proc: refused by what it names, before a temporary file."""
    from statebox.errors import UserError

    for path in (Path("/dev/fd/1"), Path("/proc/self/fd/1")):
        with pytest.raises(UserError, match="leads into /proc"):
            replace_file(path, b"<p>page</p>")


def test_a_dangling_link_at_the_target_is_replaced(tmp_path):
    target = tmp_path / "page.html"
    target.symlink_to(tmp_path / "gone")
    replace_text(target, "<p>new</p>")
    assert not target.is_symlink() and target.read_text() == "<p>new</p>" and not (tmp_path / "gone").exists()


@pytest.mark.parametrize("head, holds", [(b"<!doctype html><html lang=en>", True), (b"\xef\xbb\xbf\n <HTML>", True),
                                         (b"", True), (b"SQLite format 3\x00", False), (b'{"type": "user"}\n', False),
                                         (b"<htmlish>", False)])
def test_a_page_replaces_only_a_page(tmp_path, head, holds):
    """`statebox report RUN --out RUN/results.sqlite` renamed the page over the run's store, and `statebox audit S.jsonl
    --html S.jsonl` over the session it audited (found by probe): a file already there must begin as a page (an
    empty one counts as none), and a link is replaced whatever it names (so what it names is never lost)."""
    from statebox.errors import UserError
    from statebox.replace_file import HTML_PAGE, refuse_unless_replaceable

    target = tmp_path / "out.html"
    target.write_bytes(head)
    if holds:
        refuse_unless_replaceable(target, HTML_PAGE)
    else:
        with pytest.raises(UserError, match="exists and is not an HTML page"):
            refuse_unless_replaceable(target, HTML_PAGE)
    link = tmp_path / "link.html"
    link.symlink_to(target)
    refuse_unless_replaceable(link, HTML_PAGE)
