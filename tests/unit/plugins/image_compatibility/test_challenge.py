"""``WWW-Authenticate`` challenges."""

from __future__ import annotations

from kubesched.plugins.image_compatibility._challenge import parse_www_authenticate


def test_parse_bearer_challenge() -> None:
    challenge = parse_www_authenticate(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:library/nginx:pull,push"'
    )
    assert challenge is not None
    assert challenge.scheme == "bearer"
    assert challenge.params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/nginx:pull,push",
    }


def test_parse_challenge_variants() -> None:
    basic = parse_www_authenticate('Basic realm="a \\"quoted\\" realm"')
    assert basic is not None
    assert (basic.scheme, basic.params) == ("basic", {"realm": 'a "quoted" realm'})
    unquoted = parse_www_authenticate("bearer Realm=https://x/token , service=x")
    assert unquoted is not None
    assert unquoted.params == {"realm": "https://x/token", "service": "x"}
    assert parse_www_authenticate("") is None
    assert parse_www_authenticate("   ") is None
