"""Answers derived from the ground-truth files alone (never from the annotation file).

The oracle reads `tracks.jsonl` (and nothing the question file says about answers)
and works out each answer the way a perfect tracker would: unique cube ids across the
pan, the ball's cup in the last frame, blocks on the stack at the end, clockwise runs
of a bolt's angle, in-view runs before a query time, the lamp's on/off runs decoded
as Morse. If the annotation file and the tracks disagree, the oracle's score through
the real scorer drops below 100% and `statebox bench validate` fails: that is the
point of computing it independently.
"""

from __future__ import annotations

import re
from pathlib import Path

from statebox.benchmarks.synthetic import failure
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.families.cup_drops import set_text
from statebox.benchmarks.synthetic.families.ec_bolts import turn_runs
from statebox.benchmarks.synthetic.measure import (  # noqa: F401 - the measurements, also read as oracle.<name>
    VISIBLE,
    block_count,
    bolts,
    by_frame,
    crossings,
    cube_count,
    cup_drops,
    cycles,
    ec_beeps,
    ec_bolts,
    eoc_objects,
    episodes,
    kind_of,
    letter_for,
    max_single_frame,
    morse_light,
    morse_unit,
    runs_of,
    shell_game,
    streaming,
    tracks_for,
    window,
    _cut,
    _letter,
    _place_names,
    _series,
)
from statebox.schema import Item, Query

def failure_probe(family: str, rows: list[gt.TrackRow], item: Item, events: list[gt.GtEvent] | None,
                  hold: int = 1, fps: int = 10) -> str:
    """Answers of the failure-mode probes (statebox.benchmarks.synthetic.variants), from the truth."""
    if family in failure.CHAINS or family in failure.SCENES:
        return failure.probe_answer(family, rows, item.meta, item.question, item.choices, events, fps)
    step, q = item.meta["probe_step"], item.question.lower()
    ordinals = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
    k = next((i + 1 for i, w in enumerate(ordinals) if f"the {w} " in q), 1)
    frames = by_frame(rows)
    if family in ("bolts", "ec_bolts"):
        series = {oid: [float(v) for _, v in s] for oid, s in _series(rows, "angle", "bolt").items()}
        runs = turn_runs(series, hold)
        if step == "event":
            return str(len(runs))
        if step == "entity":
            last = frames[-1]
            order = sorted((r for r in last if r.cls == "bolt"), key=lambda r: r.amodal()[0] + r.amodal()[2])
            return str([r.id for r in order].index(runs[k - 1][0]) + 1)
        loosening = "how many loosening actions" in q
        return str(sum(1 for r in runs[:k] if (r[1] > 0 if loosening else r[1] < 0)))
    # cup_drops: changes of the cups' contents
    places = _place_names(frames[-1], "cup")
    contents = [{r.id: tuple(r.state.get("balls", [])) for r in f if r.cls == "cup"} for f in frames]
    changes = [(f, oid) for f in range(1, len(contents)) for oid in contents[f] if contents[f][oid] != contents[f - 1][oid]]
    if step == "event":
        return str(len(changes))
    if step == "entity":
        return _letter(item, f"{places[changes[k - 1][1]]} cup")
    f = changes[k - 1][0]
    held = [("left", "middle", "right").index(places[oid]) for oid, balls in contents[f].items() if balls]
    return _letter(item, set_text(held))


# ---- entry points ---------------------------------------------------------------------------
def family_of(name: str) -> str:
    """A dataset label of a variant suite (`bolts@stretch2`, ...) -> its family."""
    return name.split("@", 1)[0]


def _time(query: Query) -> float:
    """A streaming query's time (every streaming query has one)."""
    if query.time is None:
        raise ValueError(f"streaming query {query.index} has no time")
    return float(query.time)


def answer_from_rows(family: str, rows: list[gt.TrackRow], item: Item, query_index: int = 0, fps: int = 10,
                     events: list[gt.GtEvent] | None = None, hold: int = 1) -> str:
    """The answer a perfect tracker reading `rows` (and, for audio, the sound events) would give."""
    family = family_of(family)
    query = item.queries[query_index]
    step = item.meta.get("probe_step")
    if step == "final" and family in failure.OWN_FINAL:  # a VSTAT doc of an EOC / streaming question
        return failure.final_answer(family, rows, item, fps)
    if step and step != "final":
        return failure_probe(family, rows, item, events, hold, fps)
    if family == "cube_count":
        return str(cube_count(rows))
    if family == "shell_game":
        return shell_game(rows)
    if family == "block_count":
        return str(block_count(rows))
    if family == "bolts":
        return str(bolts(rows, hold))
    if family == "morse_light":
        return morse_light(rows)
    if family == "streaming_count":
        return str(streaming(rows, item.labels["counting_subtype"], kind_of(item.question), _time(query), fps))
    if family == "streaming_window":
        past = re.search(r"past (\d+(?:\.\d+)?) seconds", item.question)
        if past is None:
            raise ValueError(f"a streaming_window question names no window: {item.question!r}")
        seconds = float(past.group(1))
        return str(window(rows, item.labels["counting_subtype"], kind_of(item.question), _time(query), seconds, fps))
    if family == "line_crossing":
        return str(crossings(_cut(rows, query.time)))
    if family == "swing":
        return str(cycles(_cut(rows, query.time)))
    if family == "lamp_episodes":
        return str(episodes(_cut(rows, query.time)))
    if family == "cup_drops":
        return cup_drops(rows, item)
    if family == "ec_bolts":
        return ec_bolts(rows, item, fps, hold)[0]
    if family == "ec_beeps":
        return ec_beeps(rows, [e.time for e in events or [] if e.kind == "beep"], fps)[0]
    if family == "eoc_objects":
        return eoc_objects(rows, item, fps)
    raise ValueError(f"unknown family {family!r}")


def clips_from_rows(family: str, rows: list[gt.TrackRow], item: Item, fps: int = 10,
                    events: list[gt.GtEvent] | None = None, hold: int = 1) -> str | None:
    """EC-Bench evidence spans worked out from the truth (None for other families)."""
    family = family_of(family)
    if family == "ec_bolts":
        return ec_bolts(rows, item, fps, hold)[1]
    if family == "ec_beeps":
        return ec_beeps(rows, [e.time for e in events or [] if e.kind == "beep"], fps)[1]
    return None


def oracle_response(family: str, family_dir: Path, item: Item, query_index: int = 0) -> str:
    """The oracle's response text for one query of one item of a generated family."""
    rows = tracks_for(family_dir, item)
    meta = gt.read_meta(family_dir, Path(item.video).stem)
    needs_events = family_of(family) == "ec_beeps" or item.meta.get("probe_step") not in (None, "final")
    events = gt.read_events(family_dir, Path(item.video).stem) if needs_events else None
    return answer_from_rows(family, rows, item, query_index, meta.fps, events, int(meta.params.get("stretch", 1)))


def oracle_clips(family: str, family_dir: Path, item: Item) -> str | None:
    rows = tracks_for(family_dir, item)
    meta = gt.read_meta(family_dir, Path(item.video).stem)
    events = gt.read_events(family_dir, Path(item.video).stem) if family_of(family) == "ec_beeps" else None
    return clips_from_rows(family, rows, item, meta.fps, events, int(meta.params.get("stretch", 1)))


def predictions(family: str, family_dir: Path, items: list[Item], answer=None) -> list[dict]:
    """Prediction rows (`{"id", "query_index", "response"[, "clips"]}`) for every query, from `answer`
    (default: the oracle, which also gives EC-Bench evidence spans)."""
    default = answer is None
    answer = answer or oracle_response
    out = []
    for item in items:
        for q in item.queries:
            row = {"id": item.id, "query_index": q.index, "response": answer(family, family_dir, item, q.index)}
            if default and item.benchmark == "ecbench":
                row["clips"] = oracle_clips(family, family_dir, item)
            out.append(row)
    return out
