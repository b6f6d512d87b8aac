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
