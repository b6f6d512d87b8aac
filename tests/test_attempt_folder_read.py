"""`attempt_folder.read_attempt_file` reads every byte `open(path, "rb").read()` reads, with its own system calls.

Its second read asks one byte (mostly end of file); a file that is longer than its size said when it was asked (it
grew while read) is read on to its end, in steps of 1 MiB, as `open().read()` reads on.
"""

from __future__ import annotations

import os

import pytest

import statebox.attempt_folder as attempt_folder


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, (1 << 20) + 3, 3 * (1 << 20) + 7])
@pytest.mark.parametrize("told", ["true size", "smaller", "zero"])
def test_a_file_is_read_whole_whatever_its_size_said(tmp_path, monkeypatch, size, told):
    path = tmp_path / "gateway.jsonl"
    data = os.urandom(size)
    path.write_bytes(data)
    if told != "true size":
        real_fstat = os.fstat

        def fstat(fd: int) -> os.stat_result:  # the size asked before the file grew to what it is now
            info = list(real_fstat(fd))
            info[6] = 0 if told == "zero" else size // 3  # st_size
            return os.stat_result(info)

        monkeypatch.setattr(attempt_folder.os, "fstat", fstat)
    reads: list[int] = []
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(attempt_folder.os, "read", read)
    assert attempt_folder.read_attempt_file(str(path)) == data == open(path, "rb").read()
    if told == "true size" and size:
        assert reads == [size + 1, 1]  # the second read asks one byte: no 1 MiB buffer to hear end of file
    assert max(reads) <= max(size + 1, 1 << 20)
