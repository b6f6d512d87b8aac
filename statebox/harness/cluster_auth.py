"""Who may use the Ray cluster: the token statebox's driver presents, and the cluster's auth mode.

Every node of a statebox cluster holds provider keys in its environment, and anyone who can
submit a Ray task can read them. Ray (>= 2.52) guards its control plane with one static bearer
token (`RAY_AUTH_MODE=token`; Ray 2.59 turned it on by default for local clusters). Before the
driver connects (`cluster.connect`), statebox:

1. finds the token the way Ray documents it, in Ray's own order: `RAY_AUTH_TOKEN` (non-empty),
   else the file `RAY_AUTH_TOKEN_PATH` names (unreadable or empty: one line, where Ray itself
   would abort the process), else the default file `~/.ray/auth_token` (what `ray
   get-auth-token --generate` writes, and where Ray's driver looks);
2. asks the cluster, with one gRPC call carrying no token, whether it wants one: the GCS's
   `GetClusterId` for `HOST:PORT`/`auto`, the Ray Client server's `ClusterInfo` for
   `ray://`. UNAUTHENTICATED means token mode, an answer means auth is disabled, no answer
   means nothing listens there. In token mode the same call with the token tells a wrong token
   from a right one at once; Ray's own client would retry for a minute and then report only
   "cannot connect", the cause (`InvalidAuthToken`) buried in its log lines;
3. refuses with one line (exit 2): a token cluster when no token was found, a token the
   cluster refuses (naming where it came from, never its value), and a cluster without token
   auth unless `--allow-unauthenticated-cluster` (anyone who reaches its ports runs code on
   nodes that hold provider keys);
4. sets the driver's `RAY_AUTH_MODE` to the cluster's mode: a Ray driver must speak its
   cluster's mode (a token driver refuses a token-less raylet's calls, and a token-less one is
   refused), and with an explicit address Ray never turns token mode on by itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal, Mapping

from pydantic import BaseModel, SecretStr

from statebox.errors import UserError

MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"
DEFAULT_TOKEN_FILE = Path(".ray") / "auth_token"  # under the home folder: Ray's `_get_default_token_path`
TOKEN_FILE_MAX_BYTES = 64 * 1024  # a token is a few dozen bytes; a bigger "token file" is a wrong path
PROBE_TIMEOUT_S = 10.0
ALLOW_FLAG = "--allow-unauthenticated-cluster"
HOW_TO_GIVE = (f"set {TOKEN_VAR} or {TOKEN_PATH_VAR}, or put it in ~/.ray/auth_token "
               "(`ray get-auth-token` prints it on a machine that has it; docs/cluster.md)")

AuthMode = Literal["token", "disabled"]


class TokenSource(BaseModel):
    """The token the driver will present and where it was found (`where` is safe to print; the
    value never is: `SecretStr` keeps it out of reprs and logs)."""

    where: str
    token: SecretStr


class ClusterAuth(BaseModel):
    """What `admit` found out about a cluster (`cluster doctor` prints it; `--json`: `auth`)."""

    address: str
    endpoint: str
    mode: AuthMode
    token_source: str | None = None
    allowed_unauthenticated: bool = False

    def describe(self) -> str:
        if self.mode == "token":
            return f"auth mode token (token accepted, from {self.token_source})"
        return (f"auth mode disabled: allowed by {ALLOW_FLAG}; anyone who reaches the cluster's ports can run code on "
                "its nodes, which hold the provider keys")


def find_token(environ: Mapping[str, str] | None = None, home: Path | None = None) -> TokenSource | None:
    """The token Ray's driver would use, in Ray's documented order, or None."""
    env = os.environ if environ is None else environ
    value = env.get(TOKEN_VAR, "").strip()
    if value:
        return TokenSource(where=TOKEN_VAR, token=value)
    named = env.get(TOKEN_PATH_VAR, "")
    if named:
        return TokenSource(where=f"{TOKEN_PATH_VAR}={named}", token=_read_token_file(Path(named), f"{TOKEN_PATH_VAR}={named}"))
    default = (home if home is not None else Path.home()) / DEFAULT_TOKEN_FILE
    if default.exists():
        where = f"the default token file {default}"
        return TokenSource(where=where, token=_read_token_file(default, where))
    return None


def _read_token_file(path: Path, where: str) -> str:
    """A token file's token: a regular file of at most `TOKEN_FILE_MAX_BYTES`, not empty."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{where}: not a regular file; it must hold the Ray cluster's token")
        if info.st_size > TOKEN_FILE_MAX_BYTES:
            raise UserError(f"{where}: {info.st_size} bytes, too big for a token file (at most {TOKEN_FILE_MAX_BYTES}); "
                            "it must hold only the Ray cluster's token")
        with open(path, "rb") as fh:
            text = fh.read(TOKEN_FILE_MAX_BYTES + 1).decode("utf-8", errors="strict").strip()
    except UserError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise UserError(f"{where}: cannot read the Ray token file ({reason})") from None
    if not text:
        raise UserError(f"{where}: the Ray token file is empty; it must hold the Ray cluster's token")
    return text


def resolve_endpoint(address: str) -> tuple[str, bool]:
    """(host:port to ask, whether it is a Ray Client server) for an address `ray.init` takes."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "").strip() or _local_cluster()
    if address.startswith("ray://"):
        rest = address[len("ray://"):].rstrip("/")
        return (rest if ":" in rest else f"{rest}:10001"), True
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UserError(f"--cluster {address}: expected auto, ray://HOST:10001 or a head's HOST:PORT")
    return address, False


def _local_cluster() -> str:
    from ray._private.services import canonicalize_bootstrap_address_or_die

    try:
        return canonicalize_bootstrap_address_or_die("auto")
    except (ConnectionError, ValueError) as exc:
        raise UserError(f"--cluster auto: no Ray cluster found on this machine ({str(exc).splitlines()[0][:160]}); "
                        "start one with `ray start --head`, or give its HOST:PORT (docs/cluster.md)") from None


def _ask(endpoint: str, client: bool, token: str | None) -> tuple[str, str]:
    """(gRPC status name, details) of one cheap call to the cluster, with or without the token.

    The channel is made here rather than by Ray's `init_grpc_channel`, whose interceptor adds
    the process's token by itself: the first call must carry none. TLS as Ray does it
    (`RAY_USE_TLS` and its certificate variables)."""
    import grpc  # Ray's dependency: only with the cluster extra

    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        from ray._common.tls_utils import load_certs_from_env

        chain, key, ca = load_certs_from_env()
        channel = grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(certificate_chain=chain, private_key=key,
                                                                                root_certificates=ca))
    else:
        channel = grpc.insecure_channel(endpoint)
    metadata = [("authorization", f"Bearer {token}")] if token else []
    try:
        if client:
            from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

            # protobuf makes the *_pb2 classes at import and ray ships no .pyi for them: mypy cannot see them
            ping = ray_client_pb2.ClusterInfoType.PING  # type: ignore[attr-defined]
            request = ray_client_pb2.ClusterInfoRequest(type=ping)  # type: ignore[attr-defined]
            ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(request, timeout=PROBE_TIMEOUT_S, metadata=metadata)
        else:
            from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

            gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
                gcs_service_pb2.GetClusterIdRequest(),  # type: ignore[attr-defined]  # a *_pb2 class: made at import
                timeout=PROBE_TIMEOUT_S, metadata=metadata)
        return "OK", ""
    except grpc.RpcError as exc:
        details = (exc.details() or "").strip()
        return exc.code().name, details.splitlines()[0][:200] if details else ""
    finally:
        channel.close()


def admit(address: str, *, allow_unauthenticated: bool = False, environ: Mapping[str, str] | None = None,
          home: Path | None = None) -> ClusterAuth:
    """The cluster's auth mode and the driver's token, or one line saying why statebox will not connect."""
    endpoint, client = resolve_endpoint(address)
    what = "Ray Client server" if client else "Ray head (GCS)"
    status, details = _ask(endpoint, client, None)
    if status in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        raise UserError(f"cannot reach the Ray cluster at {address}: no {what} answers at {endpoint} ({details or status}); "
                        "start one with `ray start --head` (docs/cluster.md)")
    if status == "OK":
        if not allow_unauthenticated:
            raise UserError(f"the Ray cluster at {address} runs without token authentication (auth mode disabled): anyone who "
                            "reaches its ports can run code on its nodes, which hold the provider keys; restart it with "
                            f"RAY_AUTH_MODE=token (docs/cluster.md), or pass {ALLOW_FLAG} to use it anyway")
        return ClusterAuth(address=address, endpoint=endpoint, mode="disabled", allowed_unauthenticated=True)
    if status != "UNAUTHENTICATED":
        hint = "; for Ray Client give ray://HOST:10001" if not client else ""
        raise UserError(f"the {what} at {endpoint} ({address}) answered {status} ({details}): not a Ray cluster of this "
                        f"Ray version?{hint}")
    source = find_token(environ, home)
    if source is None:
        raise UserError(f"the Ray cluster at {address} requires a token (auth mode token) and none was found: {HOW_TO_GIVE}")
    status, details = _ask(endpoint, client, source.token.get_secret_value())
    if status == "UNAUTHENTICATED":
        raise UserError(f"the Ray cluster at {address} refused the token from {source.where} (auth mode token): it is not "
                        "the token the cluster was started with (`ray get-auth-token` on the head prints that one; docs/cluster.md)")
    if status != "OK":
        raise UserError(f"the Ray cluster at {address} did not answer with the token from {source.where} ({status}: {details})")
    return ClusterAuth(address=address, endpoint=endpoint, mode="token", token_source=source.where)


_saved_mode: list[str | None] = []  # the driver's RAY_AUTH_MODE before `use_mode`, restored by `restore_mode`


def use_mode(mode: AuthMode) -> None:
    """Make this process's Ray driver speak `mode` (as Ray's own `_enable_token_auth` does: the
    environment, then Ray's cached config and token reloaded)."""
    if not _saved_mode:
        _saved_mode.append(os.environ.get(MODE_VAR))
    os.environ[MODE_VAR] = mode
    _reload_ray_config()


def restore_mode() -> None:
    if not _saved_mode:
        return
    previous = _saved_mode.pop()
    if previous is None:
        os.environ.pop(MODE_VAR, None)
    else:
        os.environ[MODE_VAR] = previous
    _reload_ray_config()


def _reload_ray_config() -> None:
    try:
        from ray._raylet import (  # type: ignore[attr-defined]  # ray's _raylet.pyi lags the extension: both exist
            AuthenticationTokenLoader,
            Config,
        )
    except ImportError:  # no Ray: nothing cached
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
