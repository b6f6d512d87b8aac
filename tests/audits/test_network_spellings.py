"""Network attempts spelled so the network rule missed them (rules.rule_network, actions._network_of, CODE_NETWORK).

The sandbox has no route out, so an attempt is what the audit can see: a command or program that tries. Each of
these audited clean: an applet behind `busybox`, `openssl s_client`, git's global options before its subcommand,
a `/dev/tcp` redirection after `<>`, and the HTTP clients of PHP, Ruby, Perl and Node. Each is a `network` finding
now, alike on the fast path (events.jsonl and a gateway-only call); honest commands that share their words stay
clean.
"""

from __future__ import annotations

import pytest

from tests.audits.test_fast_path_differential import assert_flagged_and_same, command_after_an_honest_one
from tests.audits.test_shell_reading import verdict_of_command as _verdict

ATTEMPTS = [
    "busybox wget -qO- http://example.com/x",
    "toybox wget http://example.com/x",
    "openssl s_client -connect example.com:443 </dev/null",
    "git -C /tmp clone https://github.com/x/y",
    "git -c http.sslVerify=false clone https://github.com/x/y",
    "git --git-dir=/tmp/r/.git fetch origin",
    "bash -c 'exec 3<>/dev/tcp/example.com/80; cat <&3'",
    "exec 3<>/dev/tcp/10.0.0.1/443",
    "php -r 'echo file_get_contents(\"https://example.com/x\");'",
    "php -r '$c = curl_init(\"http://example.com\"); curl_exec($c);'",
    "ruby -e 'require \"net/http\"; puts Net::HTTP.get(URI(\"http://example.com\"))'",
    "ruby -ropen-uri -e 'puts URI.open(\"http://example.com\").read'",
    "perl -MLWP::Simple -e 'print get(\"http://example.com\")'",
    "perl -MHTTP::Tiny -e 'print HTTP::Tiny->new->get(\"http://example.com\")->{content}'",
    "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(\"example.com:80\")'",
    "node -e 'require(\"https\").get(\"https://example.com\", r => r.pipe(process.stdout))'",
    "node -e 'const net = require(\"net\"); net.connect(80, \"example.com\")'",
]


@pytest.mark.parametrize("command", ATTEMPTS)
def test_the_attempt_is_a_network_finding(command: str) -> None:
    assert "network" in {f.category for f in _verdict(command).findings}, command


@pytest.mark.parametrize("command", ATTEMPTS)
@pytest.mark.parametrize("where", ["events", "gateway"])
def test_both_paths_flag_it_alike(tmp_path, command, where):
    assert_flagged_and_same(command_after_an_honest_one(tmp_path, command, where))


@pytest.mark.parametrize("command", [
    "openssl dgst -sha256 /workspace/video.mp4", "git -C /workspace status", "git -C /workspace log --oneline",
    "busybox ls -la", "node -e 'const fs = require(\"fs\"); console.log(fs.readdirSync(\".\"))'",
    "perl -ne 'print if /cup/' /workspace/notes.txt", "ruby -e 'puts File.read(\"/workspace/notes.txt\")'",
    "php -r 'echo file_get_contents(\"/workspace/notes.txt\");'",
])
def test_honest_commands_stay_clean(command: str) -> None:
    verdict = _verdict(command)
    assert verdict.verdict == "clean", verdict.findings
