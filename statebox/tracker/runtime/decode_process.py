"""Decode video frames in a child process and hand them over through shared memory.

Why a process: the thread reader's OpenCV `read` releases the GIL, but everything around
it (the per-frame Python loop, numpy bookkeeping) takes it back, and so do the detector's
pre/post-processing and ByteTrack in the main process; with N streams that is N decode
threads contending for one GIL. A child process has its own interpreter and GIL.

Hand-over: one shared-memory segment of `slots` slots of `batch` frames each (the size
`probe` reports, h*w*3 bytes a frame). The parent sends free slot numbers down one pipe;
the child decodes the next batch with the same `opencv_batches` loop the thread reader
runs (so the frames are byte for byte the same), writes it into the slot and sends
(slot, indices, times, counts) back up another pipe. Only those few numbers are pickled,
never a frame, except frames of another size than probed (a resolution change mid-stream),
which travel inside the message. The parent copies the slot's frames out (one memcpy a
frame) and returns the slot at once: the consumer keeps frames for several batches
(detection in flight, per-object features), so views into a slot the child rewrites would
be wrong.

Why not `multiprocessing` (spawn/forkserver + `shared_memory`): spawn re-runs the parent's
main module in the child (a script without a `__main__` guard starts children forever and
fails), and a named segment outlives a parent killed with SIGKILL unless a resource-tracker
process (one more pid) is there to unlink it. Here the child is a plain
`python -c "... child_main()"` that imports only this module, OpenCV and numpy; the segment
is a /dev/shm file unlinked the moment it is created (the child inherits its descriptor), so
there is never a name to leak, whatever kills whom; its space is reserved up front
(`posix_fallocate`), so a full /dev/shm is a clear error here, never a SIGBUS in the child.

Shutdown: `close()` (also on early exit from the iteration, and from a finalizer if the
reader is dropped unclosed) tells the child to stop, drains its pipe, waits, terminates it
if it does not end, and frees the mapping. The child ends by itself when the parent's pipe
end closes (the parent died). An exception in the child reaches the consumer as
`DecodeError` naming it, with the child's traceback; a child that dies without a word
(killed, a crash in native code) is a `DecodeError` with its exit code.

Limits: the sandbox caps /dev/shm (a 64 MiB tmpfs) and the number of pids, and other
streams share both; `ProcessFrameReader` raises `DecoderUnavailable` (the caller falls
back to the thread reader and logs why) when the slots would take more than half of
/dev/shm's free space or fewer than `PIDS_MARGIN` pids would be left.
"""

from __future__ import annotations

import json
import mmap
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Iterator

import numpy as np

from .decode import CountedReader, Counts, DecodeError, FrameBatch, opencv_batches, probe

SHM_DIR = "/dev/shm"
SHM_SHARE = 0.5  # at most this share of /dev/shm's free space for one reader's slots
PIDS_MARGIN = 32  # pids that must stay free after the child and its decoder threads start
CLOSE_WAIT_S = 5.0


class DecoderUnavailable(RuntimeError):
    """This decoder cannot run here (a limit, a missing library); the message says why."""


def shm_free_bytes(folder: str = SHM_DIR) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def pids_left(cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Pids this container may still start (None when unlimited or unknown).

    Inside a container its own cgroup is mounted at /sys/fs/cgroup: cgroup v2 has pids.max
    there, cgroup v1 (e.g. Docker with the cgroupfs driver) under pids/."""
    for folder in (cgroup, cgroup / "pids"):
        try:
            limit = (folder / "pids.max").read_text().strip()
            current = int((folder / "pids.current").read_text().strip())
        except (OSError, ValueError):
            continue
        return None if limit == "max" else int(limit) - current
    return None


def child_pids() -> int:
    """Pids a child costs: itself, FFmpeg's decoding threads (about one a core) and a few more."""
    return (os.cpu_count() or 1) + 4


def _segment(size: int) -> int:
    """A descriptor of `size` bytes of /dev/shm, reserved, with no name left behind."""
    path = os.path.join(SHM_DIR, f"sbtracker-decode-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise DecoderUnavailable(f"cannot create shared memory in {SHM_DIR}: {exc.strerror}") from exc
    try:
        os.unlink(path)
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        os.close(fd)
        raise DecoderUnavailable(f"cannot reserve {size / 2**20:.1f} MiB in {SHM_DIR}: {exc.strerror}") from exc
    return fd


def child_main() -> None:
    """The child: decode frames into the ring slots the parent hands over, until the video ends or it says stop.

    argv[1] is a JSON object: path, fps, stride, batch, shape, and the inherited descriptors
    shm_fd, shm_size, slots_fd (free slot numbers in; None = stop), out_fd (messages out).
    Messages: ("frame", slot, None | an odd-sized frame), then ("batch", indices, times,
    read, grabbed) after a batch's frames; ("done", read, grabbed) at the end; ("error",
    type, text, traceback)."""
    a = json.loads(sys.argv[1])
    slots_in = Connection(a["slots_fd"], writable=False)
    out = Connection(a["out_fd"], readable=False)
    buf = None
    try:
        buf = mmap.mmap(a["shm_fd"], a["shm_size"])
        shape = tuple(a["shape"])
        frame_bytes = int(np.prod(shape))
        counts = Counts()
        for fb in opencv_batches(Path(a["path"]), a["fps"], a["stride"], a["batch"], counts):
            for image in fb.images:
                try:
                    slot = slots_in.recv()
                except EOFError:  # the parent is gone
                    return
                if slot is None:  # stop
                    return
                if image.shape == shape and image.dtype == np.uint8:
                    np.ndarray(shape, np.uint8, buffer=buf, offset=slot * frame_bytes)[...] = image
                    out.send(("frame", slot, None))
                else:
                    out.send(("frame", slot, image))
            out.send(("batch", fb.indices, fb.times, counts.read, counts.grabbed))
        out.send(("done", counts.read, counts.grabbed))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            out.send(("error", type(exc).__name__, str(exc), traceback.format_exc()))
        except (OSError, ValueError):
            pass
    finally:
        if buf is not None:
            buf.close()


_DONE = object()


def _receive(name: str, results: Connection, slots_out: Connection, buf: mmap.mmap, shape: tuple[int, int, int],
             counts: Counts, ready: queue.Queue, stop: threading.Event, proc: subprocess.Popen) -> None:
    """The parent's receiver thread: copy each frame out of its slot as it arrives, hand the slot back, and
    queue whole batches (a bounded queue: when the consumer lags, this thread waits and so does the child).

    A module function, not a method, so a reader dropped unclosed can still be finalized."""
    frame_bytes = int(np.prod(shape))
    images: list[np.ndarray] = []
    error: BaseException | None = None
    try:
        while not stop.is_set():
            try:
                message = results.recv()
            except (EOFError, OSError):
                if stop.is_set():
                    return
                try:
                    code = proc.wait(5.0)
                except subprocess.TimeoutExpired:
                    code = None
                raise DecodeError(f"{name}: the decoder process ended (exit code {code}) before the end of the "
                                  f"video, after {counts.read} frames") from None
            kind = message[0]
            if kind == "frame":
                _, slot, odd = message
                if odd is None:
                    view = np.ndarray(shape, np.uint8, buffer=buf, offset=slot * frame_bytes)
                    odd = view.copy()
                    del view  # no export of the mapping may outlive this line (close() unmaps it)
                images.append(odd)
                try:
                    slots_out.send(slot)
                except OSError:  # the child already finished: nothing to hand back
                    pass
            elif kind == "batch":
                _, indices, times, counts.read, counts.grabbed = message
                ready.put(FrameBatch(list(indices), list(times), images))
                images = []
            elif kind == "done":
                _, counts.read, counts.grabbed = message
                return
            else:
                _, type_name, text, trace = message
                raise DecodeError(f"{name}: decoding in the decoder process failed: {type_name}: {text}\n"
                                  f"child traceback:\n{trace}")
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer
        error = exc
    finally:
        ready.put((_DONE, error))


def _shutdown(proc: subprocess.Popen, slots_out: Connection, results: Connection, buf: mmap.mmap,
              stop: threading.Event, ready: queue.Queue, receiver: threading.Thread) -> None:
    """Stop the child (asking, then terminating, then killing), the receiver thread, and free the segment.
    Runs once (weakref.finalize)."""
    stop.set()
    try:
        slots_out.send(None)
    except (OSError, ValueError):
        pass
    deadline = time.monotonic() + CLOSE_WAIT_S
    while receiver.is_alive() and time.monotonic() < deadline:
        try:  # drained, so the receiver is never stuck on a full queue (and the child on a full pipe)
            ready.get(timeout=0.05)
        except queue.Empty:
            pass
    if proc.poll() is None:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    slots_out.close()  # the receiver (if it still waits on a silent child) sees EOF once the child is gone
    receiver.join(2.0)
    results.close()
    if not receiver.is_alive():
        buf.close()


class ProcessFrameReader(CountedReader):
    """`FrameReader`'s contract (iterate `FrameBatch`es; `info`, `frames_read`, `frames_grabbed`, `close`)
    with the decoding in a child process."""

    kind = "process"
    fallback: str | None = None

    def __init__(self, path: Path, *, stride: int = 1, batch: int = 8, prefetch: int = 4,
                 ring: int | None = None) -> None:
        """`ring` frames of shared memory (default two batches, fewer when /dev/shm is short; at least 2)."""
        if stride < 1 or batch < 1 or prefetch < 1:
            raise ValueError("stride, batch and prefetch must be >= 1")
        self.path = Path(path)
        self.info = probe(self.path)
        self.stride, self.batch = stride, batch
        self.counts = Counts()
        h, w = self.info.height, self.info.width
        if h <= 0 or w <= 0:
            raise DecoderUnavailable(f"{self.path.name}: the frame size is unknown before decoding")
        shape = (h, w, 3)
        frame_bytes = h * w * 3
        free = shm_free_bytes()
        if free is None:
            raise DecoderUnavailable(f"no {SHM_DIR} here")
        ring = max(2, min(ring or 2 * batch, int(SHM_SHARE * free) // frame_bytes))
        if ring * frame_bytes > SHM_SHARE * free:
            raise DecoderUnavailable(
                f"{ring} frames of {w}x{h} need {ring * frame_bytes / 2**20:.1f} MiB of shared memory; "
                f"{SHM_DIR} has {free / 2**20:.1f} MiB free (at most {SHM_SHARE:.0%} is used)")
        left = pids_left()
        if left is not None and left < child_pids() + PIDS_MARGIN:
            raise DecoderUnavailable(f"only {left} pids left in this container; a decoder process needs "
                                     f"~{child_pids()} and {PIDS_MARGIN} stay free")
        self.ring = ring
        size = ring * frame_bytes
        fd = _segment(size)
        buf = mmap.mmap(fd, size)
        slots_r, slots_w = os.pipe()
        out_r, out_w = os.pipe()
        slots_out = Connection(slots_w, readable=False)
        results = Connection(out_r, writable=False)
        args = {"path": str(self.path), "fps": self.info.fps, "stride": stride, "batch": batch, "shape": shape,
                "shm_fd": fd, "shm_size": size, "slots_fd": slots_r, "out_fd": out_w}
        root = Path(__file__).resolve().parents[__package__.count(".") + 1]
        code = (f"import sys; sys.path.insert(0, {str(root)!r}); "
                f"from {__package__}.decode_process import child_main; child_main()")
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(args)],
                                          pass_fds=(fd, slots_r, out_w), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL)
        except OSError as exc:
            for conn in (slots_out, results):
                conn.close()
            buf.close()
            raise DecoderUnavailable(f"cannot start a decoder process: {exc}") from exc
        finally:
            # the child's ends and the segment's descriptor (the mapping keeps its own): closed here, so
            # each side sees EOF when the other is gone and unmapping frees the segment
            for own in (slots_r, out_w, fd):
                os.close(own)
        self._ready: queue.Queue = queue.Queue(maxsize=prefetch)
        stop = threading.Event()
        receiver = threading.Thread(target=_receive, name="sbtracker-decode-receiver", daemon=True,
                                    args=(self.path.name, results, slots_out, buf, shape, self.counts, self._ready,
                                          stop, self._proc))
        self._close = weakref.finalize(self, _shutdown, self._proc, slots_out, results, buf, stop, self._ready,
                                       receiver)
        for slot in range(ring):
            slots_out.send(slot)
        receiver.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def __iter__(self) -> Iterator[FrameBatch]:
        if not self._close.alive:
            raise DecodeError(f"{self.path.name}: the reader is closed")
        while True:
            item = self._ready.get()
            if isinstance(item, tuple) and item and item[0] is _DONE:
                if item[1] is not None:
                    raise item[1]
                return
            yield item

    def close(self) -> None:
        self._close()


if __name__ == "__main__":
    child_main()
