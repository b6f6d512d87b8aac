"""`statebox demo`: the main job on the built-in suite, end to end, with no API key.

Generates the tiny suite, runs the tracker baseline and a cheating coding agent
in sandboxes beside the chance baselines and the oracle, audits every session,
scores, writes the report and prints the leaderboard. With ANTHROPIC_API_KEY or
OPENAI_API_KEY set it also runs the real coding agent on a few items.

Why in phases (one run folder, one run id; each phase runs only its agents' attempts, the
last one names every agent, so run.json, the leaderboard and the report hold them all):
  1. the host-side agents (oracle, chance: no sandbox), seconds; their leaderboard is printed
     at once, before the minutes of sandboxed work;
  2. the tracker with its attempts grouped per container (`group` option, `run_group`: one
     model load for up to `--group` attempts, each still its own workspace, folder, audit and
     row), ONE such container at a time (`containers=1`) while the next group's workspaces are
     cut: detection uses every core, and a group that starts after the one before it has filed
     its detections in the run's cache (statebox/tracker/detection_cache.py) detects only
     frames no earlier query of its video saw (78 attempts ask about 24 videos);
  3. the other sandboxed agents (the cheating coding agent) at `-c`, then the leaderboard.
A one-line timing summary per phase ends the output (`demo timing by phase: ...`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer
from pydantic import JsonValue
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from statebox import signals
from statebox.agents.base import make_agent
from statebox.attempt_folder import RUN_CONFIG_FILE
from statebox.commands.run import execute_run
from statebox.harness.plan import RunConfig, agent_options, datasets_from_suite
from statebox.harness.runner import run_planned
from statebox.model_names import ANTHROPIC_MODEL, OPENAI_MODEL
from statebox.report.page import write_report
from statebox.report.leaderboard import wide_console
from statebox.progress import ProgressDisplay
from statebox.sandbox.docker import SandboxEngine
from statebox.sandbox.images import ensure_image
from statebox.testing.cheating_model import CHEATING_SCRIPT
from statebox.testing.scripted_model import ScriptedModelServer

DEMO_AGENTS = ["oracle", "chance-random", "chance-frequency", "tracker", "claude-code-scripted"]
SUITE_COLUMNS = [TextColumn("suite {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
CHEATER_ITEMS = 1  # the cheating coding agent runs on this many items per dataset (it is slow-ish and always caught)
GROUPED_AGENT = "tracker"  # the agent whose attempts share a container (`group` option)
DEMO_GROUP = 16  # tracker attempts per container: one model load (seconds on a CPU) serves them all
TRACKER_CONTAINERS = 1  # tracker containers at once: inference takes every core; the next group is prepared meanwhile
GROUP_WAIT_S = 20.0  # a group's first attempt waits this long for the others: each first cuts its own workspace,
# and 2 x 8 of them at once on a busy 2-core machine arrive over seconds (at 5 s, groups of 2 and 6 formed)
RUN_COLUMNS = [TextColumn("[bold]{task.fields[agent]:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Path = typer.Option(Path("demo-run"), help="folder for the suite, the run and the report"),
        concurrency: int = typer.Option(2, "--concurrency", "-c", help="sandboxes at once"),
        group: int = typer.Option(DEMO_GROUP, "--group", min=1,
                                  help="tracker attempts per container (one model load for all of them); 1 = one each"),
        seed: int = typer.Option(0, help="suite seed"),
        agents: Optional[list[str]] = typer.Option(None, "--agent", help="override the demo's agents"),
        real_items: int = typer.Option(3, help="items per dataset for a real coding agent when an API key is set"),
    ) -> None:
        """Run the main job on the built-in tiny suite and print the leaderboard and report path."""
        from statebox.benchmarks.synthetic.suite import make_suite, render_workers  # the generator: only when run

        console = wide_console()
        t0 = time.time()
        timing: list[str] = []  # "phase Ns", printed as one line at the end
        mark = time.monotonic()

        def lap(phase: str) -> None:
            nonlocal mark
            now = time.monotonic()
            timing.append(f"{phase} {now - mark:.0f}s")
            mark = now

        out = out.resolve()
        out.mkdir(parents=True, exist_ok=True)
        SandboxEngine()  # no engine -> one clear line, before anything else happens
        chosen = list(agents) if agents else list(DEMO_AGENTS)
        console.rule("[bold]statebox demo")
        console.print("images: making sure the sandbox images exist (built once, then cached by content hash)")
        images = ["sandbox"] + [image for agent, image in (("tracker", "tracker"), ("claude-code-scripted", "agents"))
                                if agent in chosen]
        # to a file or a pipe every step prints a progress line at least every 15 s (statebox/progress.py)
        with ProgressDisplay("demo images", console) as display:
            display.add("images", total=len(images))
            for done, image in enumerate(images):
                display.update("images", note=image)
                ensure_image(image)
                display.update("images", done=done + 1)
                signals.check()  # the safe points between the steps: a stop signal ends the demo here
        lap("images")
        suite_dir = out / "suite"
        if not (suite_dir / "suite.json").exists():
            console.print(f"suite: generating the tiny built-in suite into {suite_dir}")
            with ProgressDisplay("demo suite", console, SUITE_COLUMNS, slots=render_workers(None)) as display:
                display.add("videos", total=None)

                def progress(label: str, done: int, total: int) -> None:
                    signals.check()
                    display.update("videos", done=done, total=total, note=label)

                make_suite(suite_dir, size="tiny", seed=seed, progress=progress)
            lap("suite")
        datasets = datasets_from_suite(suite_dir)
        run_dir = out / "run"
        options: dict[str, dict[str, JsonValue]] = (
            {GROUPED_AGENT: {"extra": {"group": group, "group_wait_s": GROUP_WAIT_S, "containers": TRACKER_CONTAINERS}}}
            if group > 1 else {})
        config = RunConfig(
            run_id="",
            agents=chosen,
            datasets=datasets,
            concurrency=concurrency,
            policy="default",
            agent_options=options,
            agent_limits={"claude-code-scripted": CHEATER_ITEMS, "scripted-cheater": CHEATER_ITEMS},
            suite=str(suite_dir),
        )
        stored = run_dir / RUN_CONFIG_FILE
        run_id = RunConfig.load(run_dir).run_id if stored.exists() else config.fingerprint(command="demo")
        config = config.model_copy(update={"run_id": run_id})
        host_side, grouped = demo_phases(config)

        # the cheating coding agent is the real `claude` CLI; its "model" is a scripted server
        # that follows the known cheating pattern, reached through the real gateway
        with ScriptedModelServer(CHEATING_SCRIPT) as cheating_model:
            console.print(f"scripted model for the cheating agent: {cheating_model.base_url}")
            gateway = {"anthropic_base_url": cheating_model.base_url, "anthropic_api_key": "scripted-demo-key"}
            if host_side:  # seconds: their scores come before the minutes of sandboxed work
                execute_run(config.model_copy(update={"agents": host_side, "concurrency": max(concurrency, 4)}), run_dir,
                            title="host-side agents (no sandbox): the sandboxed agents run next", gateway_options=gateway)
                lap(f"host-side agents ({', '.join(host_side)})")
            if grouped:
                # one container at a time serving up to `group` attempts; the next `group` attempts
                # prepare their workspaces meanwhile (and join the next group)
                slots = 2 * group
                console.print(f"{GROUPED_AGENT}: up to {group} attempts per container, {TRACKER_CONTAINERS} container "
                              "at a time; each frame of a video detected once (the run's detection cache)")
                _run_quietly(config.model_copy(update={"agents": [GROUPED_AGENT], "concurrency": slots}), run_dir,
                             console, gateway)
                lap(f"{GROUPED_AGENT} (grouped by {group})")
            rest = [a for a in chosen if a not in host_side and a not in grouped]
            scores = execute_run(config, run_dir, title="statebox demo — built-in tiny suite", gateway_options=gateway)
            lap(f"{', '.join(rest)} + leaderboard" if rest else "leaderboard")
        real = _real_agent()
        if real is not None:
            agent_name, model = real
            console.print(f"API key found: adding the real {agent_name} ({model}) on {real_items} items per dataset")
            real_config = RunConfig(
                run_id="",
                agents=[agent_name],
                datasets=datasets,
                limit=real_items,
                concurrency=1,
                policy="default",
                agent_options={agent_name: {"model": model}},
                suite=str(suite_dir),
            )
            real_dir = out / "run-real"
            real_id = (RunConfig.load(real_dir).run_id if (real_dir / RUN_CONFIG_FILE).exists()
                       else real_config.fingerprint(command="demo"))
            real_config = real_config.model_copy(update={"run_id": real_id})
            execute_run(real_config, real_dir, title=f"statebox demo — {agent_name}")
            write_report(out / "run-real")
            lap(f"{agent_name} (real model)")
        path, scores, rows = write_report(run_dir)
        lap("report")
        cheats = [r for r in rows if r.agent in ("claude-code-scripted", "scripted-cheater")]
        if cheats:
            caught = sum(1 for r in cheats if r.verdict == "contaminated")
            console.print(
                f"[bold]auditor:[/] cheating coding-agent attempts flagged contaminated: {caught}/{len(cheats)} "
                f"(their answers are voided in the 'voided' column)"
            )
        console.print(f"[bold]report:[/] {path}")
        console.print(f"demo timing by phase: {', '.join(timing)}; total {time.time() - t0:.0f}s")
        console.print(f"demo finished in {time.time() - t0:.0f} s")


def demo_phases(config: RunConfig) -> tuple[list[str], list[str]]:
    """(host-side agents, grouped agents): the phases run ahead of the last one (the rest, and the
    leaderboard). No host-side phase when they are every agent of the run (the last phase runs them)."""
    host_side = [a for a in config.agents if not make_agent(a, agent_options(config, a)).needs_sandbox]
    grouped = [a for a in config.agents
               if a == GROUPED_AGENT and int(agent_options(config, a).extra.get("group", 1)) > 1]
    if len(host_side) == len(config.agents):
        host_side = []  # the last phase runs them: no leaderboard twice
    return host_side, grouped


def _run_quietly(config: RunConfig, run_dir: Path, console, gateway_options: dict) -> None:
    """Run a phase's attempts with a progress display and no leaderboard (the last phase prints it)."""
    with ProgressDisplay("run", console, RUN_COLUMNS, slots=config.concurrency) as display:
        def on_start(tallies) -> None:
            for name, tally in tallies.items():
                display.add(name, total=tally.total, done=tally.done, agent=name)

        def on_progress(agent_name, row, tally) -> None:
            display.update(agent_name, done=tally.done, failed=tally.failed)

        run_planned(config, run_dir, progress=on_progress, on_start=on_start, gateway_options=gateway_options).close()


def _real_agent() -> tuple[str, str] | None:
    """Which real coding agent the demo can add, from the keys the user set."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "claude-code", os.environ.get("STATEBOX_DEMO_MODEL", ANTHROPIC_MODEL)
    if os.environ.get("OPENAI_API_KEY"):
        return "codex", os.environ.get("STATEBOX_DEMO_MODEL", OPENAI_MODEL)
    return None
