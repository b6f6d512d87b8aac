"""Which requests the model gateway forwards, and where: strict targets, a fixed endpoint table.

Issue 12: the gateway used to build the upstream URL by joining the base URL and
the client's raw request target, and to decide "is this a model call?" on that
raw path. Both were holes. A target such as `@evil:80/x` turned the base URL's
host into userinfo (the real key went to a host the agent chose); a path such as
`/v1/x/../messages` skipped the budget and allow-list checks and was then
normalised by the HTTP client into the provider's messages endpoint.

So nothing the client sends is ever joined into a URL:

- `parse_target` accepts origin-form only (`/` + path + optional query), from a
  small character set, with no `.`/`..` segments, no `//`, no percent-encoding,
  no backslashes, no control or non-ASCII bytes, no fragment. Absolute-form,
  authority-form (CONNECT) and asterisk-form all fail it.
- `route` looks the clean path up in `ENDPOINTS`, an explicit table per provider
  (method, path, generation API, allowed query keys). The table's own path is
  what goes upstream; query values are re-encoded from a strict character set.
- `UpstreamBase` is parsed once from the configured base URL; the upstream URL is
  built from its fixed scheme, host and port plus the table path, never from text.

Budget and allow-list decisions read `Route.endpoint.api`, so they are made on
exactly the endpoint that will be called. Everything here is pure (no I/O), so
the parser is unit-tested directly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import httpx

Provider = Literal["anthropic", "openai"]

MAX_TARGET_BYTES = 2048
MAX_QUERY_PARAMS = 8
# Methods the gateway serves at all; everything else (TRACE, OPTIONS, CONNECT, PUT, ...) is 405.
SERVED_METHODS = frozenset({"GET", "HEAD", "POST"})

_PATH_CHARS = re.compile(rb"^[A-Za-z0-9/._~:-]*$")
_QUERY_KEY = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_QUERY_VALUE = re.compile(r"^[A-Za-z0-9._~:-]{0,256}$")
_ID_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class RouteError(Exception):
    """A request the gateway refuses before anything goes upstream: HTTP status, error kind, reason."""

    def __init__(self, status: int, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.kind, self.reason = status, kind, reason


@dataclass(frozen=True)
class Target:
    """A request target that passed `parse_target`: a clean path and its query pairs (in order)."""

    path: str
    query: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """One row of the endpoint table.

    `api` names the generation API whose requests are budgeted and allow-listed
    (`anthropic`, `responses`, `chat`); None for listing or counting endpoints.
    `local` endpoints are answered by the gateway itself and never forwarded.
    A path segment `{id}` matches one model id (letters, digits, `._:-`).
    """

    provider: Provider
    path: str
    methods: frozenset[str]
    api: str | None = None
    query_keys: frozenset[str] = frozenset()
    local: bool = False

    def match(self, path: str) -> bool:
        want, got = self.path.split("/"), path.split("/")
        if len(want) != len(got):
            return False
        return all(w == g or (w == "{id}" and bool(_ID_SEGMENT.match(g))) for w, g in zip(want, got))


def _ep(provider: Provider, methods: str, path: str, api: str | None = None, query: str = "",
        local: bool = False) -> Endpoint:
    return Endpoint(provider, path, frozenset(methods.split()), api, frozenset(query.split()), local)


# The only endpoints that exist for a sandbox. `HEAD /` (Claude Code's connectivity probe) and
# `GET /` are answered locally. Shared paths (`/v1/models`) go to the provider the client's
# headers name (see `route`).
ENDPOINTS: dict[Provider, tuple[Endpoint, ...]] = {
    "anthropic": (
        _ep("anthropic", "GET HEAD", "/", local=True),
        _ep("anthropic", "POST", "/v1/messages", api="anthropic", query="beta"),
        _ep("anthropic", "POST", "/v1/messages/count_tokens", query="beta"),
        _ep("anthropic", "GET", "/v1/models", query="beta limit after_id before_id"),
        _ep("anthropic", "GET", "/v1/models/{id}", query="beta"),
    ),
    "openai": (
        _ep("openai", "POST", "/v1/responses", api="responses"),
        _ep("openai", "POST", "/v1/chat/completions", api="chat"),
        _ep("openai", "GET", "/v1/models", query="client_version"),
        _ep("openai", "GET", "/v1/models/{id}"),
    ),
}


@dataclass(frozen=True)
class Route:
    """Where one accepted request goes: its table endpoint, the concrete path, the re-encoded query."""

    endpoint: Endpoint
    path: str
    query: tuple[tuple[str, str], ...] = ()

    @property
    def provider(self) -> Provider:
        return self.endpoint.provider

    @property
    def api(self) -> str | None:
        return self.endpoint.api

    @property
    def query_string(self) -> str:
        return "&".join(f"{k}={v}" if v else k for k, v in self.query)


def parse_target(target: bytes | str) -> Target:
    """A strict origin-form request target, or `RouteError(400, ...)` saying what is wrong with it."""
    raw = target.encode("latin-1", "replace") if isinstance(target, str) else bytes(target)

    def bad(reason: str) -> RouteError:
        return RouteError(400, "invalid_request_error", f"bad request target: {reason}")

    if not raw:
        raise bad("empty")
    if len(raw) > MAX_TARGET_BYTES:
        raise bad(f"longer than {MAX_TARGET_BYTES} bytes")
    if any(b < 0x21 or b > 0x7E for b in raw):
        raise bad("control, space or non-ASCII character")
    if b"\\" in raw:
        raise bad("backslash")
    if raw == b"*":
        raise bad("asterisk-form is not served")
    if not raw.startswith(b"/"):
        raise bad("only origin-form (a path starting with '/') is served; no scheme, host or userinfo")
    if b"#" in raw:
        raise bad("fragment")
    path_b, sep, query_b = raw.partition(b"?")
    if b"%" in path_b:
        raise bad("percent-encoding in the path")
    if not _PATH_CHARS.match(path_b):
        raise bad("character not allowed in a path")
    if b"//" in path_b:
        raise bad("empty path segment ('//')")
    segments = path_b.split(b"/")[1:]
    if any(seg in (b".", b"..") for seg in segments):
        raise bad("dot segment ('.' or '..')")
    return Target(path=path_b.decode("ascii"), query=_parse_query(query_b.decode("ascii")) if sep else ())


def _parse_query(query: str) -> tuple[tuple[str, str], ...]:
    if not query:
        return ()
    pairs: list[tuple[str, str]] = []
    parts = query.split("&")
    if len(parts) > MAX_QUERY_PARAMS:
        raise RouteError(400, "invalid_request_error", f"bad request target: more than {MAX_QUERY_PARAMS} query parameters")
    for part in parts:
        key, _, value = part.partition("=")
        if not _QUERY_KEY.match(key) or not _QUERY_VALUE.match(value):
            raise RouteError(400, "invalid_request_error", "bad request target: query parameter not allowed")
        if any(key == k for k, _ in pairs):
            raise RouteError(400, "invalid_request_error", f"bad request target: repeated query parameter {key!r}")
        pairs.append((key, value))
    return tuple(pairs)


def provider_hint(headers: Mapping[str, str] | None) -> Provider | None:
    """The provider a client's headers name: Anthropic clients send `anthropic-version` / `x-api-key`."""
    if headers and ("anthropic-version" in headers or "x-api-key" in headers):
        return "anthropic"
    if headers and "authorization" in headers:
        return "openai"
    return None


def guess_provider(target: bytes | str, headers: Mapping[str, str] | None = None) -> Provider:
    """Whose error shape to answer a refused request in (the request itself is not trusted)."""
    hint = provider_hint(headers)
    if hint:
        return hint
    text = target.decode("latin-1") if isinstance(target, bytes) else target
    return "anthropic" if "messages" in text or text in ("/", "") else "openai"


def route(method: str, target: bytes | str, headers: Mapping[str, str] | None = None) -> Route:
    """The table route for a request, or `RouteError` (400 bad target, 404 unknown endpoint, 405 method)."""
    if method not in SERVED_METHODS:
        raise RouteError(405, "invalid_request_error", f"method {method[:16]!r} is not served")
    parsed = parse_target(target)
    matches = [ep for eps in ENDPOINTS.values() for ep in eps if ep.match(parsed.path)]
    if not matches:
        raise RouteError(404, "not_found_error", f"no such endpoint: {parsed.path[:200]}")
    if len({ep.provider for ep in matches}) > 1:
        hint = provider_hint(headers) or "openai"
        matches = [ep for ep in matches if ep.provider == hint] or matches
    endpoint = matches[0]
    if method not in endpoint.methods:
        raise RouteError(405, "invalid_request_error", f"method {method} is not allowed on {endpoint.path}")
    for key, _ in parsed.query:
        if key not in endpoint.query_keys:
            raise RouteError(400, "invalid_request_error", f"query parameter {key!r} is not allowed on {endpoint.path}")
    return Route(endpoint=endpoint, path=parsed.path, query=parsed.query)


@dataclass(frozen=True)
class UpstreamBase:
    """A provider's fixed scheme, host, port and path prefix, parsed once from its base URL."""

    scheme: str
    host: str
    port: int | None
    prefix: str  # "" or a clean path without a trailing slash, e.g. "/v1"

    @classmethod
    def parse(cls, base_url: str) -> "UpstreamBase":
        """Refuses (ValueError) anything but http(s)://host[:port][/clean/path] with no userinfo, query or fragment."""
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"base URL {base_url!r}: scheme must be http or https")
        if not parts.hostname:
            raise ValueError(f"base URL {base_url!r}: no host")
        if "@" in parts.netloc:
            raise ValueError(f"base URL {base_url!r}: userinfo is not allowed")
        if parts.query or parts.fragment:
            raise ValueError(f"base URL {base_url!r}: query or fragment is not allowed")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"base URL {base_url!r}: bad port") from exc
        prefix = parts.path.rstrip("/")
        if prefix:
            try:
                parse_target(prefix)
            except RouteError as exc:
                raise ValueError(f"base URL {base_url!r}: {exc.reason}") from exc
        return cls(scheme=parts.scheme, host=parts.hostname, port=port, prefix=prefix)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = {"http": 80, "https": 443}[self.scheme]
        return host if self.port in (None, default) else f"{host}:{self.port}"

    def path_for(self, path: str) -> str:
        """The upstream path of a table path: a base ending in /v1 (OpenAI's convention) absorbs the /v1."""
        if self.prefix.endswith("/v1") and path.startswith("/v1/"):
            return self.prefix + path[3:]
        return self.prefix + path

    def url(self, r: Route) -> httpx.URL:
        """The upstream URL, assembled from components (nothing the client sent is parsed into it)."""
        parts: dict = {"scheme": self.scheme, "host": self.host, "port": self.port, "path": self.path_for(r.path)}
        if r.query:
            parts["query"] = r.query_string.encode("ascii")
        return httpx.URL(**parts)
