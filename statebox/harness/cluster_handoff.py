"""What crosses between a Ray head (`harness/cluster.py`) and its nodes (`harness/cluster_worker.py`).

Typed models, not dicts: the run's spec (put once in Ray's object store), each task's
shipped videos, and each task's result (rows with their packed attempt folders, the node that
ran them, a tracker group's error). Ray pickles them; an object reference inside (a video's
or a file's bytes, the spec itself) stays a reference until the node asks for it with
`ray.get`, so the head never resends what a node already has.

Object references are typed `object` here: Ray is an optional dependency with no type
information, and nothing but `ray.get` ever looks inside one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from statebox.harness.plan import DatasetSpec, RunConfig
from statebox.harness.store import ResultRow
from statebox.schema import Item


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class ShippedFile(_Frozen):
    """A head file an agent option names (tracker weights, a prompt template), put in Ray's store once."""

    name: str
    ref: object  # ray.ObjectRef of the file's bytes


class ShippedDataset(_Frozen):
    """A dataset as a node gets it: its spec, its items, and the key of its node-local video folder."""

    spec: DatasetSpec
    key: str
    items: list[Item]


class RunSpec(_Frozen):
    """Everything a node needs to start a run's services (`cluster_worker.NodeRun`)."""

    config: RunConfig
    policy_yaml: str | None = None  # a policy file on the head: the node gets its text
    datasets: list[ShippedDataset]
    # the Gateway's keyword options, passed through as given (keys removed by the head: a node's
    # gateway takes its key from the node's environment)
    gateway_options: dict[str, Any] = {}
    files: dict[str, ShippedFile] = {}  # content hash -> the file
    file_options: dict[str, dict[str, str]] = {}  # agent -> {option: content hash}


class RunSpecRef(_Frozen):
    """The run's spec in Ray's object store, and the key a node's process caches its services under."""

    ref: object  # ray.ObjectRef of a RunSpec
    key: str


class ShippedVideo(_Frozen):
    """An attempt's video: its content key (the node's cache folder), its path inside the dataset's
    video folder, and the reference to its bytes."""

    key: str
    rel: str
    ref: object  # ray.ObjectRef of the video's bytes


class NodeIdentity(_Frozen):
    node_id: str = ""
    node: str
    host: str
    docker_host: str = ""
    pid: str


class PackedAttempt(_Frozen):
    """One finished attempt: its row and its folder (`cluster_worker.pack_folder`; empty: none)."""

    row: ResultRow
    folder: bytes = b""


class GroupError(_Frozen):
    """The first attempt of a tracker group whose thread raised on the node (it has no row)."""

    attempt_id: str
    type: str
    user_error: bool
    message: str = ""


class BatchResult(_Frozen):
    """A task's outcome: the rows in the order of the batch (a group's failed member left out)."""

    who: NodeIdentity
    results: list[PackedAttempt]
    group: int = 1  # attempts that shared one container (a tracker group)
    error: GroupError | None = None
