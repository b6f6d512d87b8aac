"""`statebox run`: plan, run (C at a time), audit, score, store; resumable."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from statebox.agents.base import make_agent
from statebox.errors import UserError
from statebox.model_retirement import retirement_notes
from statebox.report.aggregate import score_run
from statebox.report.attribution import attribute_rows, attribution_json
from statebox.harness.cluster import RayExecutor
from statebox.harness.cluster_probe import engine_is_default, require_shared_filesystem
from statebox.harness.plan import (
    RUN_CONFIG_FILE,
    RunConfig,
    Sample,
    agent_options,
    dataset_from_flags,
    datasets_from_suite,
    load_datasets,
    parse_budgets,
    sweep_variants,
)
from statebox.harness.runner import run_planned
from statebox.report.leaderboard import attribution_table, print_leaderboard, wide_console
from statebox.harness.trust import TrustSettings
from statebox.harness.trust_results import run_trust
from statebox.report.trust_view import trust_table
from statebox.policies.model import load_policy
from statebox.progress import ProgressDisplay


# the flags that define a run (what run.json holds); `--concurrency`, `--run-dir`, `--json`, `--cluster` do not
CONFIG_FLAGS = ("agent", "bench", "data", "videos", "suite", "limit", "epochs", "policy", "model", "provider", "effort",
                "prompt_template", "frames", "fps", "sample", "seed", "streaming", "timestamps", "weights", "agent_option",
                "impossible_rate", "counterfactual")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the user gave a flag (on the command line or through its environment variable).
    By the source's name: typer ships its own copy of click, whose enum is not click's."""
    source = ctx.get_parameter_source(name)
    return getattr(source, "name", None) in ("COMMANDLINE", "ENVIRONMENT")


def _refuse_other_config(run_dir: Path, stored: RunConfig, wanted: RunConfig) -> None:
    """One line, before anything is written, when a run folder would get a second configuration:
    its rows would mix into one leaderboard and run.json would be overwritten."""
    differing = stored.differing_keys(wanted)
    if differing:
        raise UserError(f"{run_dir}: holds another run configuration (its {RUN_CONFIG_FILE} differs in "
                        f"{', '.join(differing)}); give another --run-dir, or `--resume {run_dir}` to continue the stored one")


def _options_from_flags(**flags: object) -> dict:
    return {k: v for k, v in flags.items() if v is not None}


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        ctx: typer.Context,
        agent: list[str] = typer.Option([], "--agent", "-a", help="agent to run (repeatable)"),
        bench: Optional[str] = typer.Option(None, help="benchmark of --data: vstat|vcbench|ecbench|eocbench|cpbench"),
        data: Optional[Path] = typer.Option(None, help="annotation file"),
        videos: Optional[Path] = typer.Option(None, help="folder the annotation's video paths are relative to"),
        suite: Optional[Path] = typer.Option(None, help="a generated suite folder (statebox bench make)"),
        limit: Optional[int] = typer.Option(None, min=1, help="first N items of each dataset"),
        epochs: int = typer.Option(1, min=1, help="attempts per query"),
        concurrency: int = typer.Option(1, "--concurrency", "-c", help="sandboxes at once"),
        policy: str = typer.Option("default", help="policy name or YAML path"),
        run_dir: Optional[Path] = typer.Option(None, help="where results go (default: runs/<config hash>)"),
        resume: Optional[Path] = typer.Option(None, help="continue the run in this folder"),
        model: Optional[str] = typer.Option(None, help="model name for model-driven agents"),
        provider: Optional[str] = typer.Option(None, help="anthropic|openai (default: from the model name)"),
        effort: Optional[str] = typer.Option(None, help="reasoning effort / thinking setting"),
        prompt_template: Optional[Path] = typer.Option(None, help="prompt template file"),
        frames: Optional[str] = typer.Option(
            None, help="mllm/video-agent: N uniform frames; a list (16,32,64) runs a sweep, one agent variant per budget"),
        fps: Optional[str] = typer.Option(None, help="mllm: frames per second; a list (1,2,5) runs a sweep"),
        sample: Optional[str] = typer.Option(
            None, help="per-LABEL=N: N items (with all their query points) per value of the item label LABEL"),
        seed: int = typer.Option(0, help="seed of --sample"),
        streaming: str = typer.Option(
            "independent", help="streaming benchmarks (VCBench): independent = one fresh sandbox per query point; "
            "session = one sandbox and one agent conversation per video, the video growing at each query time"),
        timestamps: bool = typer.Option(True, help="show timestamps with frames"),
        weights: Optional[Path] = typer.Option(None, help="tracker: weights file"),
        agent_option: list[str] = typer.Option([], "--option", "-o", help="extra agent option KEY=VALUE (repeatable)"),
        as_json: bool = typer.Option(False, "--json", help="print the results as JSON on stdout"),
        impossible_rate: float = typer.Option(
            0.0, "--impossible-rate", help="mix in this fraction of impossible items per dataset (answer not in the video)"),
        counterfactual: float = typer.Option(
            0.0, "--counterfactual", help="re-ask this fraction of items as twins whose answer differs (memorisation check)"),
        cluster: Optional[str] = typer.Option(
            None, "--cluster", help="run the attempts on a Ray cluster: auto, ray://HOST:10001 or a head's HOST:PORT (docs/cluster.md)"),
        allow_unauthenticated_cluster: bool = typer.Option(
            False, "--allow-unauthenticated-cluster",
            help="with --cluster: use a cluster without Ray token authentication (its nodes hold the provider keys)"),
    ) -> None:
        """Run agents on a benchmark or the generated suite; rerun the same command to resume.

        A run folder holds one configuration: the same command continues it; another one
        into the same folder is refused (one line naming the differing keys, nothing written).
        `--resume DIR` continues DIR's stored run.json; configuration flags given with it must
        describe that same configuration (else refused the same way), `--concurrency` may change."""
        if allow_unauthenticated_cluster and not cluster:
            raise UserError("--allow-unauthenticated-cluster goes with --cluster ADDRESS")

        def config_from_flags() -> tuple[RunConfig, Path]:
            if not agent:
                raise UserError("name at least one --agent")
            for name in agent:
                if "@" in name:
                    raise UserError(f"--agent {name!r}: '@' names a sweep variant; give the budgets with --frames/--fps")
            if suite is not None:
                if not (suite / "suite.json").exists():
                    raise UserError(f"{suite}: not a suite folder (no suite.json); make one with `statebox bench make --out {suite}`")
                datasets = datasets_from_suite(suite)
            elif bench and data:
                datasets = [dataset_from_flags(bench, data, videos)]
            else:
                raise UserError("give --suite DIR, or --bench NAME --data FILE [--videos DIR]")
            options = _options_from_flags(
                model=model,
                provider=provider,
                effort=effort,
                prompt_template=str(prompt_template) if prompt_template else None,
                weights=str(weights) if weights else None,
            )
            if not timestamps:
                options["timestamps"] = False
            extra = {}
            for pair in agent_option:
                key, sep, value = pair.partition("=")
                if not sep or not key:
                    raise UserError(f"--option {pair!r}: expected KEY=VALUE")
                extra[key] = value
            if extra:
                options["extra"] = extra
            sweeps = {"frames": parse_budgets("--frames", frames, int), "fps": parse_budgets("--fps", fps, float)}
            variants = sweep_variants(list(agent), options, sweeps)
            sampled = Sample.parse(sample, seed) if sample is not None else None
            for flag, rate in (("--impossible-rate", impossible_rate), ("--counterfactual", counterfactual)):
                if not 0.0 <= rate <= 1.0:
                    raise UserError(f"{flag} {rate:g}: expected a fraction between 0 and 1")
            if streaming not in ("independent", "session"):
                raise UserError(f"--streaming {streaming!r}: expected independent or session")
            mode: Literal["independent", "session"] = "session" if streaming == "session" else "independent"
            trust = (TrustSettings(impossible_rate=impossible_rate, counterfactual_rate=counterfactual)
                     if impossible_rate or counterfactual else None)
            config = RunConfig(
                run_id="",
                agents=list(variants),
                datasets=datasets,
                limit=limit,
                epochs=epochs,
                concurrency=concurrency,
                policy=policy,
                agent_options=variants,
                suite=str(suite.resolve()) if suite else None,
                streaming=mode,
                sample=sampled,
                trust=trust,
            )
            digest = config.fingerprint()
            target_dir = run_dir or Path("runs") / digest
            update: dict[str, object] = {"run_id": digest}
            if trust is not None:  # twin videos go into the run folder, which the id names
                update["trust"] = trust.model_copy(update={"out_dir": str((target_dir / "trust").resolve())})
            config = config.model_copy(update=update)
            return config, target_dir

        given = [name for name in CONFIG_FLAGS if _given(ctx, name)]
        if resume is not None:
            config = RunConfig.load(resume)
            target_dir = resume
            if run_dir is not None and Path(run_dir).resolve() != Path(resume).resolve():
                raise UserError(f"--resume {resume} and --run-dir {run_dir}: give one run folder")
            if given:
                if not (agent and (suite is not None or (bench and data))):
                    spelled = {param.name: param.opts[0] for param in ctx.command.params}
                    flags = ", ".join(spelled.get(name, name) for name in given)
                    raise UserError(f"--resume {resume} continues the configuration in its run.json; {flags} cannot change "
                                    "it: drop them, or give the whole command to check that it matches")
                _refuse_other_config(resume, config, config_from_flags()[0])
            if _given(ctx, "concurrency"):
                config.concurrency = concurrency  # how many at once changes no result
        else:
            config, target_dir = config_from_flags()
            if (target_dir / RUN_CONFIG_FILE).exists() or (target_dir / RUN_CONFIG_FILE).is_symlink():
                stored = RunConfig.load(target_dir)
                _refuse_other_config(target_dir, stored, config)
                config.run_id = stored.run_id  # same folder, same configuration, same attempt ids: resume
        executor = None
        if cluster:
            executor = RayExecutor(cluster, allow_unauthenticated=allow_unauthenticated_cluster)
        else:
            _refuse_foreign_engine(config)
        execute_run(config, target_dir, as_json=as_json, executor=executor)


def _refuse_foreign_engine(config) -> None:
    """A DOCKER_HOST that does not see this host's files would run attempts with missing mounts:
    probe it (once) and refuse with one line naming the cluster mode (harness/cluster_probe.py)."""
    if engine_is_default():
        return
    if any(make_agent(name, agent_options(config, name)).needs_sandbox for name in config.agents):
        require_shared_filesystem(load_policy(config.policy))


def warn_of_retired_models(config) -> None:
    """One line on stderr for each model the run names that its provider retired or will retire (model_retirement.py),
    before any sandbox starts: a retired model fails every attempt."""
    for note in retirement_notes(str(options["model"]) for options in config.agent_options.values() if options.get("model")):
        typer.echo(f"warning: {note}", err=True)


def execute_run(
    config, run_dir: Path, *, as_json: bool = False, title: str = "statebox leaderboard", gateway_options: dict | None = None,
    executor=None,
) -> list:
    """Run with a live progress display, then print the leaderboard (or JSON)."""
    warn_of_retired_models(config)
    console = wide_console(stderr=as_json)
    columns: list[ProgressColumn | str] = [
        TextColumn("[bold]{task.fields[agent]:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("fail {task.fields[failed]}  tok {task.fields[tokens]}  ${task.fields[cost]:.4f}"),
    ]
    # on a terminal the bars; to a file or a pipe a plain line at least every 15 s (statebox/progress.py);
    # an error or a signal leaves no final bar beside its one line
    display = ProgressDisplay("run", console, columns, slots=config.concurrency)

    def on_start(tallies) -> None:
        for name, tally in tallies.items():
            display.add(name, total=tally.total, done=tally.done, agent=name, failed=0, tokens=0, cost=0.0)

    def on_progress(agent_name, row, tally) -> None:
        display.update(agent_name, done=tally.done, failed=tally.failed, tokens=tally.tokens, cost=tally.cost)

    with display:
        store = run_planned(config, run_dir, progress=on_progress, on_start=on_start, gateway_options=gateway_options,
                            executor=executor)
    rows = store.rows()
    store.close()
    loaded = load_datasets(config)
    items = {d.spec.label: d.items for d in loaded}
    rows, trust = run_trust(config, loaded, rows, run_dir)  # impossible items and twins never count in the score
    scores = score_run(rows, items)
    attribution = attribute_rows(rows, items)  # failure-mode variants: parents by first failing step
    if trust is not None:
        for s in scores:
            s.extra["trust"] = trust.results.get((s.agent, s.dataset))
        for note in trust.plan.notes:
            console.print(f"[dim]{note}[/dim]")
    if as_json:
        payload = {"run_dir": str(run_dir),
                   "results": [{**s.to_json(), **(trust.entry(s.agent, s.dataset) if trust else {})} for s in scores],
                   "failure_attribution": attribution_json(attribution)}
        sys.stdout.write(json.dumps(payload, default=str) + "\n")
    else:
        print_leaderboard(scores, console, title=title)
        if trust is not None:
            console.print(trust_table(trust))
        if attribution:
            console.print(attribution_table(attribution))
        console.print(f"results: {run_dir}/results.sqlite  (report: statebox report {run_dir})")
    return scores
