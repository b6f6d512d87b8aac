"""The `codex` agent: the real Codex CLI (`codex exec --json`) inside the sandbox.

The pinned static binary (see scripts/setup/40-agent-clis.sh) runs as user `agent`
in the `agents` image with no network. Codex has no unix-socket option, so the
container first starts `statebox-relay` (TCP 127.0.0.1 -> the gateway socket),
then `exec`s codex with a generated `config.toml` in a tmpfs `CODEX_HOME`:

- a custom Responses provider pointed at the relay (`wire_api = "responses"`;
  Codex refuses `chat`), its key read from the per-attempt token (`env_key`);
- analytics, plugins and the hosted web-search tool off (web search would run on
  the provider's servers, i.e. reach the internet through the gateway);
- `-s danger-full-access`: Codex's own bubblewrap sandbox can't start inside an
  unprivileged container, and the container *is* the sandbox;
- stdin is /dev/null (otherwise `codex exec` waits to append stdin to the prompt).

Its `--json` lines are parsed live into the session and kept as `codex.jsonl`.

Streaming sessions (`--streaming session`): one container per item (`open_stream`,
`cli_common.CliStream`); config.toml is written and the relay started once, the first
point runs `codex exec`, later points `codex exec resume <thread_id>` with the id from the
first point's `thread.started` line (Codex keeps the rollout under `$CODEX_HOME/sessions`
on the container's home tmpfs), so the model sees the whole conversation.

Options: `model`, `effort` (`model_reasoning_effort`: minimal|low|medium|high|xhigh|max|ultra; which a model takes
is the CLI's catalog, `codex debug models`: GPT-6 and GPT-5.6 low..max, most of them `ultra` too, GPT-5.5 low..xhigh;
`minimal` only older models served elsewhere),
`prompt_template`, and in `extra`: `config` (more top-level config.toml keys; on the
command line `-o config.KEY=VALUE`),
`max_retries` (request/stream retries, default 3), `cli_args` (extra CLI arguments).
"""

from __future__ import annotations

import json
from typing import Any

from statebox.agents.cli_common import CliLaunch, CliStream, extra_cli_args, run_cli_attempt
from statebox.attempt import AgentOptions, AttemptContext, GatewaySession, provider_for
from statebox.errors import UserError
from statebox.sandbox.gateway import DEFAULT_RELAY_PORT, relay_command
from statebox.schema import Session
from statebox.sessions.codex_jsonl import RAW_LOG, CodexNormaliser

# every level the pinned CLI's catalog (0.169) names, and `minimal` for older models a local server may serve
EFFORTS = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")
CODEX_HOME = "/home/agent/.codex"  # on the home tmpfs; never under $TMPDIR (Codex refuses helpers there)
PROVIDER_ID = "statebox"
KEY_ENV = "OPENAI_API_KEY"  # set by the gateway's container_env to the per-attempt token

# `sh -c` wrapper: $1 is config.toml's text, the rest are codex's arguments. The relay's own
# stdout (its pid) goes to stderr so codex's stdout stays pure JSON lines.
WRAPPER = (
    'set -e; umask 077; mkdir -p "$CODEX_HOME"; printf "%s" "$1" > "$CODEX_HOME/config.toml"; shift; '
    "{relay} 1>&2; exec codex \"$@\" < /dev/null"
)


def toml_value(value: Any) -> str:
    """A TOML scalar/array for config.toml (JSON strings are valid TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _scalar(text: str) -> Any:
    """`-o config.KEY=VALUE` arrives as text: read true/false and numbers as such."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def config_overrides(extra: dict[str, Any]) -> dict[str, Any]:
    """Extra top-level config.toml keys: `extra["config"]` (a mapping) and `config.KEY` options."""
    found = extra.get("config") or {}
    if not isinstance(found, dict):
        raise UserError("codex option 'config' must be a mapping; on the command line use -o config.KEY=VALUE")
    out = dict(found)
    for key, value in extra.items():
        if key.startswith("config.") and len(key) > len("config."):
            out[key[len("config."):]] = _scalar(value) if isinstance(value, str) else value
    return out


def render_config(*, model: str | None, effort: str | None, relay_port: int, max_retries: int,
                  extra: dict[str, Any] | None = None) -> str:
    """config.toml for one attempt: the relay as the only provider, nothing that phones home."""
    top: dict[str, Any] = {
        "model_provider": PROVIDER_ID,
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "web_search": "disabled",
        "check_for_update_on_startup": False,
    }
    if model:
        top["model"] = model
    if effort:
        top["model_reasoning_effort"] = effort
    top.update(extra or {})
    lines = [f"{key} = {toml_value(value)}" for key, value in top.items()]
    provider = {
        "name": "statebox gateway",
        "base_url": f"http://127.0.0.1:{relay_port}/v1",
        "wire_api": "responses",
        "env_key": KEY_ENV,
        "request_max_retries": max_retries,
        "stream_max_retries": max_retries,
    }
    lines += ["", f"[model_providers.{PROVIDER_ID}]"] + [f"{k} = {toml_value(v)}" for k, v in provider.items()]
    lines += ["", "[analytics]", "enabled = false", "", "[features]", "plugins = false",
              "", "[history]", 'persistence = "none"']
    return "\n".join(lines) + "\n"


class CodexAgent:
    """Codex, headless, in the sandbox; see the module docstring."""

    name = "codex"
    provider = "openai"  # whatever the model is called (a local vLLM model too): Codex speaks Responses
    needs_sandbox = True
    needs_gateway = True
    # no --model: the CLI's own default, an OpenAI GPT/Codex model (harness/plan.py:pinned_models)
    default_models = ("gpt-*", "codex-*")

    def __init__(self, options: AgentOptions | None = None) -> None:
        self.options = options or AgentOptions()
        if self.options.effort is not None and self.options.effort not in EFFORTS:
            raise UserError(f"codex effort must be one of {', '.join(EFFORTS)} (got {self.options.effort!r})")
        self.extra_config = config_overrides(self.options.extra)

    def config(self, relay_port: int) -> str:
        return render_config(model=self.options.model, effort=self.options.effort, relay_port=relay_port,
                             max_retries=int(self.options.extra.get("max_retries", 3)), extra=self.extra_config)

    def command(self, prompt: str, relay_port: int) -> list[str]:
        codex_args = ["exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access",
                      *extra_cli_args(self.options), "--", prompt]
        script = WRAPPER.format(relay=relay_command(relay_port))
        return ["/bin/sh", "-c", script, "statebox-codex", self.config(relay_port), *codex_args]

    def launch(self, ctx: AttemptContext, gw: GatewaySession, prompt: str) -> CliLaunch:
        port = int(self.options.extra.get("relay_port", DEFAULT_RELAY_PORT))
        env = {**gw.container_env(relay_port=port), "CODEX_HOME": CODEX_HOME, "TMPDIR": "/tmp"}
        return CliLaunch(
            cli="codex",
            command=self.command(prompt, port),
            env=env,
            raw_log=RAW_LOG,
            normaliser=CodexNormaliser(),
            meta={"model": self.options.model, "effort": self.options.effort},
        )

    def run(self, ctx: AttemptContext) -> Session:
        return run_cli_attempt(ctx, self.name, provider_for(self.options, fixed=self.provider), self.launch)

    # -- streaming sessions (cli_common.CliStream)

    def open_stream(self, ctx: AttemptContext, points: int) -> CliStream:
        return CliStream(ctx, self.name, provider_for(self.options, fixed=self.provider), self, points)

    def _relay_port(self) -> int:
        return int(self.options.extra.get("relay_port", DEFAULT_RELAY_PORT))

    def stream_setup(self, ctx: AttemptContext) -> tuple[list[str] | None, dict[str, str]]:
        """config.toml into CODEX_HOME and the relay started, once for the session's container."""
        port = self._relay_port()
        script = ('set -e; umask 077; mkdir -p "$CODEX_HOME"; printf "%s" "$1" > "$CODEX_HOME/config.toml"; '
                  f"{relay_command(port)} 1>&2")
        return ["/bin/sh", "-c", script, "statebox-codex-setup", self.config(port)], {"CODEX_HOME": CODEX_HOME, "TMPDIR": "/tmp"}

    def stream_launch(self, ctx: AttemptContext, gw: GatewaySession, prompt: str, conversation: str | None) -> CliLaunch:
        launch = self.launch(ctx, gw, prompt)
        if conversation:
            args = ["exec", "resume", "--json", "--skip-git-repo-check", *extra_cli_args(self.options), "--", conversation, prompt]
        else:
            args = ["exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access", *extra_cli_args(self.options),
                    "--", prompt]
        launch.command = ["/bin/sh", "-c", 'exec codex "$@" < /dev/null', "statebox-codex", *args]
        return launch

    @staticmethod
    def conversation_of(obj: dict[str, Any]) -> str | None:
        """`thread.started` carries the thread id `codex exec resume` takes."""
        value = obj.get("thread_id") if obj.get("type") == "thread.started" else None
        return str(value) if value else None
