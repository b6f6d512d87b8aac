"""The gateway's strict target parser and endpoint table, as pure functions (issue 12, points 1-2)."""

from __future__ import annotations

import pytest

from statebox.sandbox.gateway.routes import ENDPOINTS, RouteError, UpstreamBase, parse_target, route

ANTHROPIC = {"x-api-key": "t", "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": "Bearer t"}

HOSTILE_TARGETS = [
    "@127.0.0.1:9/x",
    "@127.0.0.1:9/v1/messages",
    "http://127.0.0.1:9/",
    "http://127.0.0.1:9/v1/messages",
    "https://evil.example/v1/messages",
    "//127.0.0.1:9/v1/messages",
    "//evil/path",
    "127.0.0.1:9",
    "evil.example:443",
    "*",
    "v1/messages",
    "/v1/x/../messages",
    "/v1/messages/..",
    "/v1/messages/.",
    "/v1/./messages",
    "/..",
    "/v1/%2e%2e/messages",
    "/v1/%2E%2E/messages",
    "/v1/x/%2e./messages",
    "/v1%2fmessages",
    "/v1%2Fmessages",
    "/v1/messages%00",
    "/v1\\..\\messages",
    "/v1/messages\\",
    "/v1//messages",
    "/v1/messages#frag",
    "/v1/mess\u00e4ges",
    "/v1/messages\x01",
    "/v1/messages\x7f",
    "/v1/messages\t",
    "/v1/me ssages",
    "/v1/messages@127.0.0.1:9",
    "/v1/messages;x=1",
    "/" + "a" * 3000,
    "",
]


@pytest.mark.parametrize("target", HOSTILE_TARGETS)
def test_hostile_targets_fail_the_parser(target):
    with pytest.raises(RouteError) as info:
        parse_target(target.encode("utf-8"))
    assert info.value.status == 400 and info.value.reason.startswith("bad request target")


@pytest.mark.parametrize("target", [
    "/v1/messages?x=@127.0.0.1:9",
    "/v1/messages?beta=true&beta=false",
    "/v1/messages?beta=%74rue",
    "/v1/messages?beta=true&x=1",
    "/v1/messages?beta=a/b",
    "/v1/messages?=x",
    "/v1/messages?" + "&".join(f"k{i}=1" for i in range(9)),
])
def test_query_injection_is_refused(target):
    with pytest.raises(RouteError) as info:
        route("POST", target.encode(), ANTHROPIC)
    assert info.value.status == 400


@pytest.mark.parametrize("method", ["TRACE", "OPTIONS", "CONNECT", "PUT", "DELETE", "PATCH", "get", "PROPFIND"])
def test_methods_outside_the_table_are_405(method):
    with pytest.raises(RouteError) as info:
        route(method, b"/v1/messages", ANTHROPIC)
    assert info.value.status == 405


@pytest.mark.parametrize("method, target", [
    ("GET", "/v1/messages"),        # the path exists, the method does not
    ("POST", "/v1/models"),
    ("POST", "/"),
    ("GET", "/v1/responses"),
])
def test_wrong_method_on_a_known_endpoint(method, target):
    with pytest.raises(RouteError) as info:
        route(method, target.encode(), ANTHROPIC)
    assert info.value.status == 405


@pytest.mark.parametrize("target", [
    "/v1/messages/", "/v1/complete", "/v1/files", "/v1/messages/batches", "/v1/x/messages", "/api/hello",
    "/v1/chat/completions/x", "/responses", "/v1/models/a/b", "/v1/models/-x", "/v2/messages",
    "/v1/organizations/me", "/v1/messages/count_tokens/x",
])
def test_unknown_endpoints_are_404(target):
    with pytest.raises(RouteError) as info:
        route("POST", target.encode(), ANTHROPIC)
    assert info.value.status in (404, 405)


@pytest.mark.parametrize("method, target, headers, provider, api, path, query", [
    ("POST", "/v1/messages", ANTHROPIC, "anthropic", "anthropic", "/v1/messages", ""),
    ("POST", "/v1/messages?beta=true", ANTHROPIC, "anthropic", "anthropic", "/v1/messages", "beta=true"),
    ("POST", "/v1/messages/count_tokens?beta=true", ANTHROPIC, "anthropic", None, "/v1/messages/count_tokens",
     "beta=true"),
    ("GET", "/v1/models?limit=20", ANTHROPIC, "anthropic", None, "/v1/models", "limit=20"),
    ("GET", "/v1/models/claude-haiku-4-5", ANTHROPIC, "anthropic", None, "/v1/models/claude-haiku-4-5", ""),
    ("POST", "/v1/responses", OPENAI, "openai", "responses", "/v1/responses", ""),
    ("POST", "/v1/chat/completions", OPENAI, "openai", "chat", "/v1/chat/completions", ""),
    ("GET", "/v1/models", OPENAI, "openai", None, "/v1/models", ""),
    ("GET", "/v1/models", {}, "openai", None, "/v1/models", ""),
    ("GET", "/v1/models?client_version=0.1.2", OPENAI, "openai", None, "/v1/models", "client_version=0.1.2"),
    ("GET", "/v1/models/ft:gpt-4o:org:x", OPENAI, "openai", None, "/v1/models/ft:gpt-4o:org:x", ""),
    ("HEAD", "/", {}, "anthropic", None, "/", ""),
    ("GET", "/", {}, "anthropic", None, "/", ""),
    ("POST", "/v1/messages?", ANTHROPIC, "anthropic", "anthropic", "/v1/messages", ""),
])
def test_legitimate_targets(method, target, headers, provider, api, path, query):
    r = route(method, target.encode(), headers)
    assert (r.provider, r.api, r.path, r.query_string) == (provider, api, path, query)


def test_every_generation_endpoint_is_in_the_table():
    apis = {ep.api for eps in ENDPOINTS.values() for ep in eps if ep.api}
    assert apis == {"anthropic", "responses", "chat"}
    for eps in ENDPOINTS.values():
        for ep in eps:
            assert not ep.methods & {"TRACE", "OPTIONS", "CONNECT"}
            parse_target(ep.path.replace("{id}", "x").encode())  # the table obeys its own parser


@pytest.mark.parametrize("base, target, url", [
    ("https://api.anthropic.com", "/v1/messages?beta=true", "https://api.anthropic.com/v1/messages?beta=true"),
    ("https://api.openai.com/v1", "/v1/responses", "https://api.openai.com/v1/responses"),
    ("http://127.0.0.1:8000/v1/", "/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions"),
    ("http://127.0.0.1:8123", "/v1/models", "http://127.0.0.1:8123/v1/models"),
    ("http://gw.internal:9000/proxy/anthropic", "/v1/messages", "http://gw.internal:9000/proxy/anthropic/v1/messages"),
])
def test_upstream_url_is_built_from_fixed_parts(base, target, url):
    b = UpstreamBase.parse(base)
    headers = ANTHROPIC if "messages" in target else OPENAI
    method = "GET" if "models" in target else "POST"
    assert str(b.url(route(method, target.encode(), headers))) == url


def test_upstream_host_header():
    assert UpstreamBase.parse("https://api.anthropic.com").host_header == "api.anthropic.com"
    assert UpstreamBase.parse("http://127.0.0.1:8123/v1").host_header == "127.0.0.1:8123"
    assert UpstreamBase.parse("http://[::1]:81").host_header == "[::1]:81"


@pytest.mark.parametrize("base", [
    "ftp://x", "http://", "http://user:pw@host/", "http://host/?a=1", "http://host/#f", "http://host/a/../b",
    "http://host:99999/", "api.anthropic.com",
])
def test_bad_base_urls_are_refused(base):
    with pytest.raises(ValueError):
        UpstreamBase.parse(base)
