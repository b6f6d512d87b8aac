"""Measured trust: impossible items and counterfactual twins mixed into a run, and their metrics.

`statebox run --impossible-rate R --counterfactual R` adds, per dataset, a fraction R of
extra items (drawn from the run id, so the same configuration plans the same ones, and
`--resume` finds them again):

- impossible items (`benchmarks/synthetic/impossible.py`): the true answer is not in the
  video handed over, while the item's annotation and this attempt's decoy files (the
  honeytoken "answer" field) hold a plausible answer. A response that scores correct against
  that plausible answer is a *hit*: a leak or a guess. Per (agent, dataset): `impossible =
  {n, hits, rate, chance_rate}` (+ a Wilson 95% interval of the rate, in the report). The
  chance rate is what the `chance-random` baseline would hit: the mean over the attempts of
  each item's hit probability, estimated from 200 seeded chance responses scored by the one
  shared scorer.
- counterfactual twins: a re-rendered twin of a generated item (`synthetic/counterfactual.py`:
  the families in its `COVERED`, e.g. cube_count: one more cube) or a transformed twin of any item whose answer a mirror or a time
  reversal changes predictably (`benchmarks/transforms.py`); items no transform changes are
  skipped and named in the run output. An attempt on a twin whose response matches the
  *source's* truth (and not the twin's) is `memorised`, with the pair of attempt ids as
  evidence. Per (agent, dataset): `counterfactual = {n, memorised}`.

Neither kind counts in the normal score: `split_rows` takes their rows out before the shared
scorer sees them. Ids are opaque (`impossible.opaque_id`) and videos are named by that id, so
nothing in a workspace (instruction, file names) labels an item. Planning is pure (no file
written); `materialise` renders/transforms the twins' videos into `RUN_DIR/trust/` before the
run's video preflight, and skips those already there (a resumed run).

This module plans and materialises (the run side); the figures are `harness/trust_results.py`, and
their terminal table and HTML are `report/trust_view.py` (the report side).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from statebox.agents.baselines import format_target
from statebox.benchmarks import transforms
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.families import FAMILIES, family_module
from statebox.benchmarks.synthetic.impossible import Donor, make_impossible, opaque_id
from statebox.errors import UserError
from statebox.replace_file import replace_text
from statebox.schema import Item, resolve_video

CHANCE_SAMPLES = 200
TRUST_DIR = "trust"
PLAN_FILE = "plan.json"  # in TrustSettings.out_dir: the plan as the run first made it


class TrustSettings(BaseModel):
    """The run configuration's part (RunConfig.trust): rates and where twin videos go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    impossible_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    counterfactual_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    out_dir: str = ""  # absolute RUN_DIR/trust (twin videos)

    @property
    def active(self) -> bool:
        return self.impossible_rate > 0 or self.counterfactual_rate > 0


class Recipe(BaseModel):
    """How to make a twin's video (run by `materialise`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Literal["mirror", "reverse", "render", "freeze"]
    src: str = ""
    dst: str
    spec: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0


class TrustItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["impossible", "twin"]
    label: str
    bench: str
    item: Item  # what the agent is asked
    source_id: str
    construction: str  # omit_truth | absent | after_cut | mirror | reverse | counterfactual.CONSTRUCTION's values
    recipe: Recipe | None = None


class DatasetLike(Protocol):
    """What planning reads of a run's dataset (harness/plan.py:DatasetSpec)."""

    label: str
    bench: str
    videos: str | None


class LoadedLike(Protocol):
    """harness/plan.py:LoadedDataset, as seen from here (plan.py imports this module); read-only
    members, so a dataset whose `spec` is a DatasetSpec matches."""

    @property
    def spec(self) -> DatasetLike: ...

    @property
    def items(self) -> list[Item]: ...


class ConfigLike(Protocol):
    """harness/plan.py:RunConfig, as seen from here."""

    run_id: str
    trust: "TrustSettings | None"
    suite: str | None


@dataclass
class TrustSource:
    """One dataset of the run as trust planning needs it."""

    label: str
    bench: str
    videos: str | None
    items: list[Item]


@dataclass
class TrustPlan:
    items: list[TrustItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped and why (printed by the run)

    def by_id(self) -> dict[str, TrustItem]:
        return {t.item.id: t for t in self.items}

    def for_label(self, label: str) -> list[TrustItem]:
        return [t for t in self.items if t.label == label]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, json.dumps({"items": [t.model_dump(mode="json") for t in self.items], "notes": self.notes}))

    @classmethod
    def load(cls, path: Path) -> "TrustPlan":
        try:
            payload = json.loads(path.read_text())
            return cls(items=[TrustItem.model_validate(t) for t in payload["items"]], notes=list(payload.get("notes", [])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: not a readable trust plan ({exc}); remove it to plan the trust items again") from exc

    def decoy_answers(self) -> dict[str, str]:
        """Impossible item id -> the plausible answer the decoy files hold (as a response would write it)."""
        out = {}
        for t in self.items:
            if t.kind == "impossible":
                target = t.item.queries[0].target if t.item.queries[0].target is not None else t.item.target
                out[t.item.id] = format_target(t.item, target)
        return out


def _count(rate: float, n: int) -> int:
    return 0 if rate <= 0 or n == 0 else min(n, max(1, round(rate * n)))


def _family(label: str) -> str:
    return label.split("@", 1)[0]


def _family_classes(label: str) -> frozenset[str]:
    # `family_module` imports the family (numpy, the renderer): only suite runs with trust items get here
    family = _family(label)
    return frozenset(family_module(family).CLASSES) if family in FAMILIES else frozenset()


def _donors(sources: Sequence[TrustSource], suite: bool) -> dict[str, list[Donor]]:
    """Per dataset label: videos of the suite's other families (with their length and classes)."""
    if not suite:
        return {}
    pool: list[tuple[str, Donor]] = []
    for src in sources:
        classes = _family_classes(src.label)
        if not classes or not src.videos:
            continue
        family_dir = Path(src.videos).parent
        seen: set[str] = set()
        for item in src.items:
            if item.video in seen:
                continue
            seen.add(item.video)
            try:
                meta = gt.read_meta(family_dir, Path(item.video).stem)
            except (OSError, ValueError):
                continue
            pool.append((src.label, Donor(video=resolve_video(item, Path(src.videos)).resolve(), duration=meta.duration,
                                          classes=classes)))
    return {src.label: [d for label, d in pool if label != src.label] for src in sources}


def plan_trust(run_id: str, settings: TrustSettings | None, sources: Sequence[TrustSource], *, suite: bool = False) -> TrustPlan:
    """The run's impossible items and twins (pure: reads ground-truth meta files, writes nothing)."""
    plan = TrustPlan()
    if settings is None or not settings.active:
        return plan
    out_dir = Path(settings.out_dir)
    donors = _donors(sources, suite) if settings.impossible_rate > 0 else {}
    for src in sources:
        videos = Path(src.videos) if src.videos else None
        # impossible items
        k = _count(settings.impossible_rate, len(src.items))
        if k:
            rng = random.Random(f"{run_id}|{src.label}|impossible")
            order = list(src.items)
            rng.shuffle(order)
            classes = _family_classes(src.label) if suite else frozenset()
            made = 0
            for item in order:
                if made >= k:
                    break
                new_id = opaque_id(run_id, src.label, item.id, "impossible")
                imp = make_impossible(item, resolve_video(item, videos).resolve(), classes=classes,
                                      donors=donors.get(src.label, []), rng=random.Random(new_id), new_id=new_id,
                                      held=out_dir / f"{new_id}.mp4", video_only="@" not in src.label and not item.transcript)
                if imp is not None:
                    recipe = None
                    if imp.freeze is not None:
                        source, cut, until = imp.freeze
                        recipe = Recipe(op="freeze", src=source, dst=imp.item.video, spec={"cut": cut, "until": until})
                    plan.items.append(TrustItem(kind="impossible", label=src.label, bench=src.bench, item=imp.item,
                                                source_id=item.id, construction=imp.kind, recipe=recipe))
                    made += 1
            if made < k:
                plan.notes.append(f"impossible: {src.label}: {made} of {k} made (the other items are neither "
                                  f"multiple-choice, streaming with changing answers, nor counting items with a donor video)")
        # counterfactual twins
        k = _count(settings.counterfactual_rate, len(src.items))
        if k:
            rng = random.Random(f"{run_id}|{src.label}|counterfactual")
            chosen = sorted(rng.sample(range(len(src.items)), k))
            skipped: list[str] = []
            for index in chosen:
                item = src.items[index]
                twin = _twin(run_id, src, item, videos, out_dir, suite)
                if isinstance(twin, str):
                    skipped.append(f"{item.id} ({twin})")
                else:
                    plan.items.append(twin)
            if skipped:
                plan.notes.append(f"counterfactual: {src.label}: {len(skipped)} of {k} sampled items skipped: " + "; ".join(skipped[:5])
                                  + (f"; ... {len(skipped) - 5} more" if len(skipped) > 5 else ""))
    return plan


def plan_for_run(config: ConfigLike, datasets: Sequence[LoadedLike]) -> TrustPlan:
    """`plan_trust` for a RunConfig and its LoadedDatasets (typed where they live, harness/plan.py,
    which imports this module: `plan.trust_plan` is this function). Once the run has started,
    the plan it stored (`materialise`) is the plan: a resume or a report made by newer code
    still finds the items that were run."""
    settings: TrustSettings | None = config.trust
    if settings is None or not settings.active:
        return TrustPlan()
    stored = Path(settings.out_dir) / PLAN_FILE
    if settings.out_dir and stored.exists():
        return TrustPlan.load(stored)
    sources = [TrustSource(d.spec.label, d.spec.bench, d.spec.videos, d.items) for d in datasets]
    return plan_trust(config.run_id, settings, sources, suite=bool(config.suite))


def _twin(run_id: str, src: TrustSource, item: Item, videos: Path | None, out_dir: Path, suite: bool) -> TrustItem | str:
    new_id = opaque_id(run_id, src.label, item.id, "twin")
    source_video = resolve_video(item, videos).resolve()
    if "@" in src.label or item.transcript:
        return "its answer may come from text (a variant suite, a transcript), which no video transform changes"
    if suite and _family(src.label) == src.label:
        from statebox.benchmarks.synthetic import counterfactual as cf  # why: numpy and the renderer, suite runs only

        if cf.twin_family(src.label) and videos is not None:
            spec = cf.twin_spec(src.label, videos.parent, item)
            if isinstance(spec, str):
                return spec
            dst = out_dir / "render" / "videos" / f"{new_id}.mp4"
            recipe = Recipe(op="render", dst=str(dst), spec=spec, seed=int(new_id[1:9], 16))
            construction = cf.CONSTRUCTION[src.label]
            return TrustItem(kind="twin", label=src.label, bench=src.bench,
                             item=cf.twin_item_for(item, new_id, dst, spec),
                             source_id=item.id, construction=construction, recipe=recipe)
    planned = transforms.plan_twin(item)
    if isinstance(planned, str):
        if suite and "@" not in src.label:  # a generated family without a re-rendered twin: say so in the run output
            from statebox.benchmarks.synthetic import counterfactual as cf  # why: numpy and the renderer, suite runs only

            if not cf.twin_family(src.label):
                return f"{planned}; {src.label} has no re-rendered twin (those with one: {', '.join(cf.COVERED)})"
        return planned
    dst = out_dir / f"{new_id}.mp4"
    return TrustItem(kind="twin", label=src.label, bench=src.bench, item=transforms.twin_item(item, planned, new_id, dst),
                     source_id=item.id, construction=planned.kind,
                     recipe=Recipe(op=planned.kind, src=str(source_video), dst=str(dst)))


def materialise(plan: TrustPlan, progress: "Callable[[TrustItem], None] | None" = None, *, out_dir: str = "") -> int:
    """Store the plan in `out_dir` (once) and make every video it needs not yet on disk (twins,
    held copies); returns how many were made."""
    if out_dir and plan.items and not (Path(out_dir) / PLAN_FILE).exists():
        plan.save(Path(out_dir) / PLAN_FILE)
    made = 0
    for t in plan.items:
        r = t.recipe
        if r is None or Path(r.dst).exists():
            continue
        if r.op == "render":
            from statebox.benchmarks.synthetic import counterfactual as cf  # why: the renderer, only when a twin is due

            cf.render_twin(r.spec, Path(r.dst).parent.parent, Path(r.dst).stem, r.seed)
        else:
            if not Path(r.src).exists():
                raise UserError(f"{r.src}: video of item {t.source_id} not found (needed for its counterfactual twin)")
            transforms.apply(r.op, Path(r.src), Path(r.dst), **r.spec)
        made += 1
        if progress is not None:
            progress(t)
    return made
