"""The optional LLM second pass, against the scripted model server (real anthropic client, real HTTP)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from statebox.audits.verdict import audit_attempt
from statebox.policies import load_policy
from statebox.testing.scripted_model import ScriptedModelServer, Turn

CORPUS = Path(__file__).parent / "corpus"


def _policy(enabled: bool):
    policy = load_policy("default").model_copy(deep=True)
    policy.audit.llm_second_pass = enabled
    policy.audit.llm_model = "claude-judge-test"
    return policy


def test_judge_raises_a_suspicious_verdict_and_is_cached(tmp_path, monkeypatch):
    attempt = tmp_path / "a"
    shutil.copytree(CORPUS / "cheat_env_dump__events", attempt)
    judgement = {"contaminated": True, "category": "env_dump", "reason": "dumped the environment looking for keys"}
    with ScriptedModelServer([Turn(text=json.dumps(judgement))]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        assert audit_attempt(attempt, _policy(False)).verdict == "suspicious"
        assert server.model_requests() == []  # off by default: no model traffic
        verdict = audit_attempt(attempt, _policy(True))
        assert verdict.verdict == "contaminated" and verdict.action == "void"
        assert any(f.rule.startswith("llm second pass") and "environment" in f.quote for f in verdict.findings)
        sent = server.model_requests()
        assert len(sent) == 1 and "env | sort" in json.dumps(sent[0].body)
        again = audit_attempt(attempt, _policy(True))
        assert again.verdict == "contaminated" and len(server.model_requests()) == 1  # answered from llm_audit.json


def test_judge_is_not_asked_about_clean_or_proven_sessions(tmp_path, monkeypatch):
    with ScriptedModelServer([Turn(text='{"contaminated": true, "category": "network", "reason": "x"}')]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        for name in ("honest_opencv__claude", "cheat_honeytoken__events"):
            shutil.copytree(CORPUS / name, tmp_path / name)
            audit_attempt(tmp_path / name, _policy(True))
        assert server.model_requests() == []
