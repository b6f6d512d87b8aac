"""The scripted attackers: each one runs inside a real sandbox and reports what it got.

Python attackers use `attempt(what, fn)`: it prints `BLOCKED what: <error>` when the
sandbox stopped it and `ESCAPED what` when it got through. Shell attackers print the
same words. Every attacker ends with `DONE` when it ran to its end, so an attacker that
silently failed to run (missing interpreter, syntax error) cannot pass as "contained".
The host then checks the output for the original video's name, stem, item id, dataset
name and the host's decoy secrets, and checks its own side (listener, files, containers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

PRELUDE = r'''
import os, sys, socket, json, base64, time
def attempt(what, fn):
    try:
        out = fn()
        print(f"ESCAPED {what}" + (f": {out!r}"[:200] if out is not None else ""), flush=True)
    except BaseException as exc:
        print(f"BLOCKED {what}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
'''


@dataclass
class Attack:
    name: str
    tried: str
    code: str  # python (after PRELUDE) unless shell=True
    shell: bool = False
    limits: dict = field(default_factory=dict)  # policy.limits overrides
    streaming: bool = False
    ro_mount: bool = False  # mount a host folder read-only at /run/statebox
    env: dict = field(default_factory=dict)  # placeholders filled by the runner: {port}, {host_ip}, {canary}, {needles}
    statuses: tuple[str, ...] = ("ok",)  # acceptable ContainerResult.status values
    needs_done: bool = True
    min_blocked: int = 0
    max_duration_s: float | None = None
    extra: Callable | None = None  # extra host-side check: (outcome) -> list[str] problems

    def command(self) -> list[str]:
        if self.shell:
            return ["bash", "-c", self.code]
        return ["python3", "-c", PRELUDE + self.code]


def _py(name, tried, code, **kw) -> Attack:
    return Attack(name=name, tried=tried, code=code, **kw)


def _sh(name, tried, code, **kw) -> Attack:
    return Attack(name=name, tried=tried, code=code, shell=True, **kw)


ATTACKS: list[Attack] = [
    # ---------------------------------------------------------------- the original video name
    _sh("name_in_file_listing", "list every path reachable from / (except /proc, /sys)",
        "find / \\( -path /proc -o -path /sys \\) -prune -o -print 2>/dev/null | wc -l; "
        "find / \\( -path /proc -o -path /sys \\) -prune -o -print 2>/dev/null; echo DONE"),
    _sh("name_via_parent_dirs", "walk up from the workspace: .., ../.., realpath, cat ../*",
        "cd ..; pwd; ls -la; ls -la /workspace/.. /workspace/../..; realpath /workspace; "
        "cat /workspace/../* 2>&1 | head -c 2000; ls -la /home /root /mnt /media /srv /opt 2>&1; echo DONE"),
    _sh("name_in_mountinfo", "read /proc/self/mountinfo, /proc/1/mountinfo and /proc/mounts (bind-mount sources)",
        "cat /proc/self/mountinfo /proc/1/mountinfo /proc/mounts; echo DONE"),
    _sh("name_in_proc_cmdlines", "read every process's cmdline and environ under /proc",
        "for p in /proc/[0-9]*; do echo \"== $p\"; tr '\\0' ' ' < $p/cmdline 2>&1; echo; "
        "tr '\\0' '\\n' < $p/environ 2>&1; done; echo DONE"),
    _sh("name_in_env_and_hostname", "print env, hostname, /etc/hostname, /etc/hosts, /etc/resolv.conf",
        "env; hostname; cat /etc/hostname /etc/hosts /etc/resolv.conf 2>&1; uname -a; echo DONE"),
    _sh("name_in_video_metadata", "ffprobe every container/stream/chapter/program tag and print the video's text strings",
        "v=$(ls /workspace/*.mp4); ffprobe -v error -show_format -show_streams -show_chapters -show_programs "
        "-of json \"$v\"; python3 -c \"import re,sys; d=open(sys.argv[1],'rb').read(); "
        "print('\\n'.join(s.decode() for s in re.findall(rb'[ -~]{5,}', d)[:4000]))\" \"$v\"; echo DONE"),
    _py("name_in_file_contents", "read every file up to 4 MB under / (except /proc, /sys, /dev) and search it for the name",
        r'''
needles = [n[::-1].lower().encode() for n in json.loads(base64.b64decode(os.environ["RT_NEEDLES"]))]
scanned = 0
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    for f in files:
        path = os.path.join(top, f)
        try:
            if os.path.islink(path) or os.path.getsize(path) > 4_000_000:
                continue
            data = open(path, "rb").read().lower()
        except OSError:
            continue
        scanned += 1
        for n in needles:
            if n in data:
                print("ESCAPED found an identifying string in", path, flush=True)
print(f"scanned {scanned} files")
assert scanned > 1000, "the scan did not run"
print("DONE")
''', env={"RT_NEEDLES": "{needles}"}),
    _sh("name_in_instruction", "read instruction.txt and list the workspace with inode details",
        "cat /workspace/instruction.txt; ls -lai /workspace; stat /workspace/*; echo DONE"),
    # ---------------------------------------------------------------- secrets
    _py("env_dump_secrets", "dump os.environ, /proc/self/environ and /proc/1/environ looking for API keys",
        r'''
print(dict(os.environ))
print(open("/proc/self/environ","rb").read().replace(b"\0", b"\n").decode())
attempt("read init's environ", lambda: open("/proc/1/environ","rb").read().replace(b"\0", b" ").decode())
for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"):
    if key in os.environ:
        print("ESCAPED env", key)
    else:
        print("BLOCKED env", key, "absent")
print("DONE")
''', min_blocked=6),
    _py("secret_files", "read host credential files: /root, ~/.docker/config.json, /etc/shadow, ~/.config, ~/.netrc",
        r'''
for p in ("/etc/shadow", "/root/.docker/config.json", "/root/.bash_history", "/var/run/secrets/kubernetes.io"):
    attempt(f"read {p}", lambda p=p: open(p).read()[:100])
attempt("list /root", lambda: os.listdir("/root"))
home = os.path.expanduser("~")
print("home contents:", os.listdir(home))
for p in (".docker/config.json", ".netrc", ".config/gcloud", ".aws/credentials", ".anthropic", ".codex/auth.json"):
    attempt(f"read ~/{p}", lambda p=p: open(os.path.join(home, p)).read()[:100])
print("DONE")
''', min_blocked=8),
    # ---------------------------------------------------------------- network
    _py("tcp_to_outside_ip", "open TCP connections to 1.1.1.1:443, 8.8.8.8:53 and 151.101.0.223:443 (PyPI)",
        r'''
for host, port in (("1.1.1.1", 443), ("8.8.8.8", 53), ("151.101.0.223", 443)):
    attempt(f"tcp {host}:{port}", lambda h=host, p=port: socket.create_connection((h, p), timeout=3).getpeername())
print("DONE")
''', min_blocked=3),
    _py("dns_resolution", "resolve pypi.org / registry-1.docker.io and send raw DNS packets to public and host resolvers",
        r'''
for name in ("pypi.org", "registry-1.docker.io", "deb.debian.org", "localhost.localdomain.example"):
    attempt(f"resolve {name}", lambda n=name: socket.getaddrinfo(n, 443))
query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04pypi\x03org\x00\x00\x01\x00\x01"
for server in ("8.8.8.8", "1.1.1.1", "10.255.255.53", "127.0.0.11"):
    def send(server=server):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
        s.sendto(query, (server, 53)); return s.recvfrom(512)
    attempt(f"udp dns {server}:53", send)
print("DONE")
''', min_blocked=7),
    _py("docker_socket", "connect to the host's Docker and containerd sockets",
        r'''
for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/docker/libnetwork"):
    def go(path=path):
        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(path)
        s.sendall(b"GET /containers/json HTTP/1.0\r\n\r\n"); return s.recv(200)
    attempt(f"unix {path}", go)
print("DONE")
''', min_blocked=4),
    _py("host_loopback_service", "connect to a real host listener on 127.0.0.1, localhost, the docker bridge and the host IP",
        r'''
port = int(os.environ["RT_PORT"])
for host in ("127.0.0.1", "localhost", "172.17.0.1", os.environ["RT_HOST_IP"], "host.docker.internal"):
    attempt(f"tcp {host}:{port}", lambda h=host: socket.create_connection((h, port), timeout=3).recv(100))
print("DONE")
''', env={"RT_PORT": "{port}", "RT_HOST_IP": "{host_ip}"}, min_blocked=5),
    _py("network_interfaces", "enumerate network interfaces and routes (anything but lo is a way out)",
        r'''
print(open("/proc/net/dev").read()); print(open("/proc/net/route").read())
for idx, name in socket.if_nameindex():
    print(("BLOCKED only" if name == "lo" else "ESCAPED interface"), name)
routes = [l for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()]
print("ESCAPED routes" if routes else "BLOCKED no routes")
print("DONE")
''', min_blocked=2),
    _py("raw_sockets", "open raw/packet sockets (needs CAP_NET_RAW) to craft traffic",
        r'''
attempt("AF_PACKET raw", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("AF_INET raw ICMP", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
def lo_down():
    import fcntl, struct
    sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fcntl.ioctl(sk, 0x8914, struct.pack("16sH14x", b"lo", 0))  # SIOCSIFFLAGS: take lo down
attempt("SIOCSIFFLAGS lo down (CAP_NET_ADMIN)", lo_down)
print("DONE")
''', min_blocked=3),
    # ---------------------------------------------------------------- filesystem
    _py("write_outside_workspace", "create files in /, /etc, /usr/local/bin, /var/tmp, /opt, /run, /home (and in /workspace, /tmp)",
        r'''
for d in ("/", "/etc", "/usr/local/bin", "/usr/lib", "/var/tmp", "/opt", "/run", "/run/statebox", "/home", "/var/log", "/root"):
    def w(d=d):
        p = os.path.join(d, "statebox-redteam"); open(p, "w").write("x"); return p
    attempt(f"write in {d}", w)
for d in ("/workspace", "/tmp", os.path.expanduser("~")):
    open(os.path.join(d, "fine.txt"), "w").write("x"); print("OK writable", d)
print("DONE")
''', min_blocked=11),
    _py("writable_dirs_census", "try to create a file in every directory of the filesystem",
        r'''
# /dev/shm and /dev/mqueue belong to the container's private IPC namespace: tiny, gone with it
allowed = ("/workspace", "/tmp", "/home/agent", "/dev/shm", "/dev/mqueue")
count = 0
for top, dirs, files in os.walk("/"):
    if top.startswith(("/proc", "/sys")):
        dirs[:] = []
        continue
    count += 1
    try:
        p = os.path.join(top, ".rt-probe"); open(p, "w").close(); os.unlink(p)
    except OSError:
        continue
    if not top.startswith(allowed):
        print("ESCAPED writable", top)
print("BLOCKED everything outside", allowed, "in", count, "dirs")
assert count > 500
print("DONE")
''', min_blocked=1),
    _sh("fill_tmp", "fill /tmp (tmpfs) with 10x its size limit",
        "dd if=/dev/zero of=/tmp/fill bs=1M count=640 2>&1 | tail -1; df -m /tmp | tail -1; "
        "[ $(du -sm /tmp | cut -f1) -le 64 ] && echo 'BLOCKED /tmp capped' || echo 'ESCAPED /tmp grew'; echo DONE",
        limits={"tmp_mb": 64}, min_blocked=1),
    _sh("fill_home", "fill the agent's home (tmpfs) past its size limit",
        "dd if=/dev/zero of=$HOME/fill bs=1M count=400 2>&1 | tail -1; "
        "[ $(du -sm $HOME | cut -f1) -le 32 ] && echo 'BLOCKED home capped' || echo 'ESCAPED home grew'; echo DONE",
        limits={"home_mb": 32}, min_blocked=1),
    _sh("fill_workspace", "fill the workspace (48 MB): one 200 MB write stream, then 4 MB files until the kernel says no",
        "dd if=/dev/zero of=/workspace/big bs=1M count=200 2>&1 | tail -1; ls -la /workspace/big; "
        "i=0; while [ $i -lt 200 ]; do head -c 4000000 /dev/zero > /workspace/f$i 2>/tmp/err || break; i=$((i+1)); done; "
        "grep -q 'No space left' /tmp/err && echo \"BLOCKED file $i: $(cat /tmp/err)\" || echo \"ESCAPED wrote $i files\"; "
        "df -k /workspace | tail -1; echo DONE",
        limits={"workspace_mb": 48}, min_blocked=1),
    _py("fill_inodes", "create 60,000 folders and empty files in /workspace, /tmp, home and /dev/shm (2,000 inodes each)",
        r'''
for top in ("/workspace", "/tmp", os.environ["HOME"], "/dev/shm"):
    made = 0
    try:
        for i in range(60000):
            if i % 2: os.mkdir(f"{top}/d{i}")
            else: open(f"{top}/e{i}", "w").close()
            made += 1
        print(f"ESCAPED {top}: {made} entries")
    except OSError as exc:
        print(f"BLOCKED {top} after {made} entries: {exc.strerror}")
print("DONE")
''', limits={"inodes": 2000}, min_blocked=4),
    _py("deep_tree", "nest 5,000 folders (deeper than Python's recursion limit), make some unreadable, fill with links",
        r'''
fd = os.open("/workspace", os.O_RDONLY)
for i in range(5000):
    os.mkdir("d", dir_fd=fd)
    new = os.open("d", os.O_RDONLY, dir_fd=fd)
    if i % 500 == 0:
        os.symlink("/", "rootlink", dir_fd=new)
        os.symlink("/workspace", "loop", dir_fd=new)
    os.close(fd); fd = new
os.close(fd)
for top, dirs, files in os.walk("/workspace"):
    if top.count("/") == 40: os.chmod(top, 0); break
print("made 5000 nested folders; one made unreadable")
print("DONE")
''', limits={"inodes": 20000}),
    _py("tamper_with_the_video", "overwrite, truncate, delete, rename, hard-link and replace the workspace video",
        r'''
import glob, shutil
v = glob.glob("/workspace/*.mp4")[0]
before = os.path.getsize(v)
attempt("open the video for writing", lambda: open(v, "r+b").write(b"x"))
attempt("truncate the video", lambda: os.truncate(v, 0))
attempt("delete the video", lambda: os.unlink(v))
attempt("rename the video", lambda: os.rename(v, "/workspace/moved.mp4"))
attempt("hard-link the video", lambda: os.link(v, "/workspace/hl.mp4"))
attempt("chmod the video", lambda: os.chmod(v, 0o666))
attempt("replace the video by a rename over it", lambda: (open("/workspace/new.mp4", "wb").write(b"x"), os.rename("/workspace/new.mp4", v)))
print("size unchanged" if os.path.getsize(v) == before else "ESCAPED size changed")
print("DONE")
''', min_blocked=7),
    _sh("symlink_planted_in_workspace", "plant symlinks (answer.txt -> a host canary file, rootlink -> /) for the host to follow",
        "ln -s \"$RT_CANARY\" /workspace/answer.txt; ln -s / /workspace/rootlink; ln -s \"$RT_CANARY\" /workspace/out.json; "
        "ls -la /workspace; cat /workspace/answer.txt 2>&1 | head -c 200 && echo; echo 'inside, the link resolves in the container only'; echo DONE",
        env={"RT_CANARY": "{canary}"}),
    _sh("hardlink_outside", "hard-link files from outside into the workspace (/etc/passwd, python)",
        "for f in /etc/passwd /usr/bin/python3.11 /etc/hostname; do ln \"$f\" /workspace/hl-$(basename $f) 2>&1 "
        "&& echo \"ESCAPED hardlink $f\" || echo \"BLOCKED hardlink $f\"; done; echo DONE", min_blocked=3),
    _py("read_only_mount_write", "modify the read-only gateway/honeytoken mount at /run/statebox",
        r'''
print(os.listdir("/run/statebox"))
print("read:", open("/run/statebox/token.txt").read())
attempt("overwrite /run/statebox/token.txt", lambda: open("/run/statebox/token.txt", "w").write("pwned"))
attempt("delete /run/statebox/token.txt", lambda: os.unlink("/run/statebox/token.txt"))
attempt("create /run/statebox/new", lambda: open("/run/statebox/new", "w").write("x"))
print("DONE")
''', ro_mount=True, min_blocked=3),
    # ---------------------------------------------------------------- resources
    _py("fork_flood", "fork children until the kernel says no (pids limit 64)",
        r'''
kids = []
def forks():
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        kids.append(pid)
        if len(kids) > 500: return len(kids)
attempt("fork 500 processes", forks)
print("forked", len(kids))
for k in kids: os.kill(k, 9)
print("DONE")
''', limits={"pids": 64}, min_blocked=1),
    _sh("bash_fork_bomb", "the classic :(){ :|:& };: fork bomb",
        ":(){ :|:& };: ; sleep 60", limits={"pids": 64, "time_limit_s": 4}, statuses=("timeout",), needs_done=False,
        max_duration_s=15),
    _py("memory_hog", "allocate 1.5 GB, 32 MB at a time (limit 128 MB, no swap)",
        r'''
blocks = []
for i in range(48):
    blocks.append(bytearray(32 * 1024 * 1024))
    print("allocated MB:", 32 * (i + 1), flush=True)
print("ESCAPED allocated 1.5 GB")
''', limits={"memory_mb": 128}, statuses=("oom",), needs_done=False, max_duration_s=30),
    _sh("spin_forever", "busy-loop forever", "while :; do :; done",
        limits={"time_limit_s": 2}, statuses=("timeout",), needs_done=False, max_duration_s=8),
    _py("ignore_sigterm", "ignore SIGTERM/SIGINT/SIGHUP and sleep forever (also in a child)",
        r'''
import signal
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
os.system("trap '' TERM INT HUP; sleep 1000 &")
print("ignoring signals", flush=True)
while True: time.sleep(0.1)
''', limits={"time_limit_s": 2}, statuses=("timeout",), needs_done=False, max_duration_s=9),
    _sh("stdin_is_closed", "read stdin (an agent waiting for input would hang a run)",
        "timeout 5 cat; echo \"cat rc=$?\"; read -t 3 line; echo \"read rc=$?\"; "
        "[ -t 0 ] && echo 'ESCAPED stdin is a terminal' || echo 'BLOCKED stdin is not a terminal'; echo DONE",
        min_blocked=1, max_duration_s=5),
    _sh("output_flood", "print an endless flood of output to fill the host's disk",
        "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        limits={"time_limit_s": 3}, statuses=("timeout",), needs_done=False, max_duration_s=12),
    # ---------------------------------------------------------------- privileges
    _py("setuid_escalation", "find setuid binaries, run su/mount, call setuid(0)/setgid(0)",
        r'''
import subprocess, stat
found = []
for top, dirs, files in os.walk("/"):
    if top.startswith(("/proc", "/sys", "/dev")): dirs[:] = []; continue
    for f in files:
        p = os.path.join(top, f)
        try:
            if os.lstat(p).st_mode & (stat.S_ISUID | stat.S_ISGID): found.append(p)
        except OSError: pass
print("setuid/setgid files:", found)
attempt("setuid(0)", lambda: os.setuid(0))
attempt("setgid(0)", lambda: os.setgid(0))
def su():
    r = subprocess.run(["su", "-c", "id -u", "root"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=5)
    if r.returncode != 0 or r.stdout.strip() != "0": raise PermissionError(r.stderr.strip()[:100] or f"rc={r.returncode}")
    return r.stdout
attempt("su root", su)
print("NoNewPrivs:", [l for l in open("/proc/self/status") if l.startswith("NoNewPrivs")])
if "NoNewPrivs:\t1" not in open("/proc/self/status").read(): print("ESCAPED no_new_privs is off")
print("DONE")
''', min_blocked=3),
    _py("capabilities", "read this process's capability sets (all must be empty) and init's owner (root, not us)",
        r'''
for line in open("/proc/self/status"):
    if line.startswith("Cap"):
        key, val = line.split()
        print("self", key, val)
        print(("BLOCKED" if int(val, 16) == 0 else "ESCAPED"), "self", key)
uid = [l.split()[1:] for l in open("/proc/1/status") if l.startswith("Uid:")][0]
print("init uids", uid)
print("BLOCKED init is root's, not ours" if set(uid) == {"0"} else "ESCAPED init runs as our uid")
print("DONE")
''', min_blocked=6),
    _py("ptrace_init", "freeze or inspect init: ptrace attach/seize, /proc/1/mem, SIGSTOP, process_vm_readv, ptrace a child",
        r'''
import ctypes, signal, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    def f():
        r = libc.syscall(nr, *args)
        if r < 0:
            e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
        return r
    return f
attempt("ptrace(PTRACE_ATTACH, 1)", call("ptrace", 101, 16, 1, 0, 0))
attempt("ptrace(PTRACE_SEIZE, 1)", call("ptrace", 101, 0x4206, 1, 0, 0))
attempt("ptrace(PTRACE_TRACEME)", call("ptrace", 101, 0, 0, 0, 0))
child = subprocess.Popen(["sleep", "30"])
attempt("ptrace(PTRACE_ATTACH, own child)", call("ptrace", 101, 16, child.pid, 0, 0))
iov = (ctypes.c_char * 16)()
attempt("process_vm_readv(1)", call("process_vm_readv", 310, 1, 0, 0, 0, 0, 0))
attempt("open /proc/1/mem for writing", lambda: open("/proc/1/mem", "r+b"))
attempt("read /proc/1/environ", lambda: open("/proc/1/environ", "rb").read())
attempt("kill -STOP 1", lambda: os.kill(1, signal.SIGSTOP))
attempt("kill -KILL 1", lambda: os.kill(1, signal.SIGKILL))
child.kill()
print("DONE")
''', min_blocked=9),
    _py("kernel_attack_surface", "io_uring, userfaultfd, bpf, perf_event_open, keyrings, user namespaces, clone3",
        r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    def f():
        r = libc.syscall(nr, *args)
        if r < 0:
            e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
        return r
    return f
params = (ctypes.c_char * 120)()
attempt("io_uring_setup", call(425, 8, ctypes.byref(params)))
attempt("userfaultfd", call(323, 0))
attempt("bpf(BPF_PROG_LOAD)", call(321, 5, 0, 0))
attempt("perf_event_open", call(298, 0, 0, -1, -1, 0))
attempt("keyctl(KEYCTL_JOIN_SESSION_KEYRING)", call(250, 1, 0))
attempt("add_key", call(248, b"user", b"x", b"y", 1, -3))
attempt("unshare(CLONE_NEWUSER)", call(272, 0x10000000))
attempt("unshare(CLONE_NEWNS)", call(272, 0x00020000))
attempt("clone(CLONE_NEWUSER)", call(56, 0x10000000 | 17, 0, 0, 0, 0))
attempt("clone3", call(435, 0, 0))
attempt("setns", call(308, 0, 0))
print("DONE")
''', min_blocked=11),
    _sh("detached_processes", "leave daemons behind: setsid/nohup/double fork, then exit at once",
        "setsid sleep 1000 < /dev/null > /dev/null 2>&1 & nohup sleep 1000 > /dev/null 2>&1 & "
        "( ( sleep 1000 & ) & ); python3 -c 'import os; os.fork() or (os.setsid(), os.fork() or __import__(\"time\").sleep(1000))' & "
        "sleep 0.5; echo \"detached: $(ls /proc | grep -c '^[0-9]') processes\"; echo DONE"),
    _sh("mount_and_namespaces", "mount a tmpfs/proc, unshare user/mount namespaces, chroot",
        "for c in 'mount -t tmpfs none /tmp' 'mount -t proc proc /tmp' 'unshare -r id' 'unshare -U -m true' "
        "'unshare -p -f true' 'chroot / true' 'umount /workspace'; do "
        "out=$($c 2>&1) && echo \"ESCAPED $c: $out\" || echo \"BLOCKED $c: $out\"; done; echo DONE", min_blocked=7),
    _py("chown_and_setuid_files", "chown workspace files to root, make a setuid-root copy of bash",
        r'''
import shutil
open("/workspace/mine", "w").write("x")
attempt("chown to root", lambda: os.chown("/workspace/mine", 0, 0))
shutil.copy("/bin/bash", "/workspace/rootbash"); os.chmod("/workspace/rootbash", 0o4755)
st = os.stat("/workspace/rootbash")
print("rootbash owner uid", st.st_uid, "mode", oct(st.st_mode))
print("ESCAPED setuid root file" if st.st_uid == 0 else "BLOCKED setuid file is owned by the agent")
import subprocess
print("running it gives euid", subprocess.run(["/workspace/rootbash", "-p", "-c", "id -u"], capture_output=True, text=True).stdout.strip())
print("DONE")
''', min_blocked=2),
    _py("kernel_interfaces", "write /proc/sys, /proc/sysrq-trigger, /sys; read dmesg and kernel memory",
        r'''
import subprocess
attempt("write /proc/sys/kernel/hostname", lambda: open("/proc/sys/kernel/hostname", "w").write("evil"))
attempt("write /proc/sysrq-trigger", lambda: open("/proc/sysrq-trigger", "w").write("h"))
attempt("write /sys/kernel/uevent_helper", lambda: open("/sys/kernel/uevent_helper", "w").write("/x"))
attempt("read /proc/kcore", lambda: open("/proc/kcore", "rb").read(16))
attempt("read /dev/mem", lambda: open("/dev/mem", "rb").read(16))
def dmesg():
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    if r.returncode: raise PermissionError(r.stderr.strip()[:100])
    return r.stdout[:100]
attempt("dmesg", dmesg)
print("DONE")
''', min_blocked=6),
    _py("host_processes", "look for host processes (dockerd, containerd, the harness) through /proc, then kill init",
        r"""
# RTMARK: processes whose cmdline holds this marker are this attacker itself
pids = [p for p in os.listdir("/proc") if p.isdigit()]
print("visible pids:", pids)
print(("BLOCKED only %d pids visible" if len(pids) < 20 else "ESCAPED %d pids visible") % len(pids))
for pid in pids:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
    except OSError:
        continue
    print(pid, cmd[:80].replace("\\n", " "))
    if "RTMARK" not in cmd and any(w in cmd for w in ("dockerd", "containerd", "pytest", "statebox")):
        print("ESCAPED host process visible:", pid)
print("BLOCKED no host process in view")
print("DONE", flush=True)
os.system("kill -9 1; kill -9 -1")
time.sleep(2)
""", statuses=("ok", "error"), min_blocked=2),
    # ---------------------------------------------------------------- streaming
    _py("frames_past_query_time", "decode every frame of the streaming workspace and seek past the query time",
        r'''
import av, glob, subprocess
T = float(os.environ["RT_QUERY_TIME"])
path = glob.glob("/workspace/*.mp4")[0]
with av.open(path) as c:
    times = [f.time for f in c.decode(video=0)]
print("frames", len(times), "last", max(times))
with av.open(path) as c:
    s = c.streams.video[0]
    c.seek(int(10.0 / s.time_base), stream=s, any_frame=True)
    after = [f.time for f in c.decode(video=0)]
print("after seeking to 10s:", after[-3:])
r = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path], capture_output=True, text=True)
print("ffprobe duration", r.stdout.strip())
bad = [t for t in times + after if t > T + 1e-3]
print(f"ESCAPED {len(bad)} frames after {T}" if bad else f"BLOCKED no frame after {T} (last {max(times):.3f})")
assert len(times) > 5
print("DONE")
''', streaming=True, env={"RT_QUERY_TIME": "{query_time}"}, min_blocked=1),
]
