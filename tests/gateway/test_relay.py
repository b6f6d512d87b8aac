"""The in-container relay (TCP loopback -> gateway unix socket): on the host, and inside a real sandbox."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from statebox.sandbox import relay as relay_module

from .conftest import DECOY_OPENAI

RELAY = Path(relay_module.__file__)
EXEC = [{"type": "function", "name": "exec_command", "description": "run",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_relay_on_host_streams_through_gateway(lease, scripted):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(RELAY), "--port", str(port), "--socket", str(lease.socket_path)])
    try:
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=lease.token, max_retries=0)
        events = list(client.responses.create(model="gpt-5", input="x", tools=EXEC, stream=True))
        assert events[-1].type == "response.completed"
        done = [e for e in events if e.type == "response.output_item.done"]
        assert json.loads(done[0].item.arguments) == {"cmd": "ls -la"}
        # Keep-alive: a second request on the same client goes through as well.
        again = client.responses.create(model="gpt-5", input="x", tools=EXEC)
        assert again.output[0].name == "exec_command"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    assert [r.headers["authorization"] for r in scripted.requests if r.method == "POST"] == [f"Bearer {DECOY_OPENAI}"] * 2
    assert lease.usage.requests == 2


def test_relay_background_returns_once_listening(lease, tmp_path):
    port = free_port()
    done = subprocess.run([sys.executable, str(RELAY), "--port", str(port), "--socket", str(lease.socket_path),
                           "--background"], timeout=10, stdout=subprocess.PIPE, text=True)
    assert done.returncode == 0
    child = int(done.stdout.strip())
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()  # listening right away: no race
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=lease.token, max_retries=0)
        assert client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}]).choices
    finally:
        os.kill(child, signal.SIGTERM)


IN_CONTAINER = r'''
import json, os, socket, subprocess, urllib.request
out = {}
# OpenAI-style client: TCP loopback -> statebox-relay -> gateway socket.
pid = subprocess.run(["statebox-relay", "--port", "18080", "--background"], capture_output=True, text=True, check=True)
req = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "gpt-4o", "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=20) as resp:
    out["relay_status"] = resp.status
    out["relay_body"] = resp.read().decode()
# Anthropic-style client: straight to the unix socket (what ANTHROPIC_UNIX_SOCKET does).
body = json.dumps({"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}).encode()
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["ANTHROPIC_UNIX_SOCKET"])
s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n"
          + b"x-api-key: " + os.environ["ANTHROPIC_API_KEY"].encode() + b"\r\nContent-Length: "
          + str(len(body)).encode() + b"\r\n\r\n" + body)
raw = b""
while chunk := s.recv(65536):
    raw += chunk
out["socket_reply"] = raw.decode()
out["env"] = dict(os.environ)
out["uid"] = os.getuid()
print(json.dumps(out))
'''


@pytest.mark.docker
def test_relay_and_socket_inside_real_sandbox(docker_engine, lease, scripted, tmp_path, limited_dir):
    from statebox.policies import load_policy
    from statebox.sandbox.docker import ContainerSpec
    from statebox.sandbox.gateway import container_env, socket_mount
    from statebox.sandbox.images import ensure_image

    workspace = limited_dir(16)
    (workspace / "probe.py").write_text(IN_CONTAINER)
    env = {**container_env(lease, "openai"), **container_env(lease, "anthropic")}
    spec = ContainerSpec(image=ensure_image("sandbox"), command=["python3", "probe.py"], workspace=workspace,
                         policy=load_policy("default"), env=env, mounts=[socket_mount(lease)], time_limit_s=60)
    result = docker_engine.run(spec, tmp_path / "out.log", tmp_path / "err.log")
    assert result.status == "ok", (tmp_path / "err.log").read_text()
    out = json.loads((tmp_path / "out.log").read_text().strip().splitlines()[-1])
    assert out["uid"] == 1000
    assert out["relay_status"] == 200 and out["relay_body"].rstrip().endswith("data: [DONE]")
    assert "HTTP/1.1 200" in out["socket_reply"] and '"type": "message"' in out["socket_reply"]
    assert DECOY_OPENAI not in json.dumps(out["env"])
    posts = [r for r in scripted.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/chat/completions", "/v1/messages"]
    assert posts[0].headers["authorization"] == f"Bearer {DECOY_OPENAI}"
    assert lease.usage.requests == 2 and len(lease.log_path.read_text().splitlines()) == 2
