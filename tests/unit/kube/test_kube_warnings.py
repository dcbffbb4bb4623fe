"""The API server's Warning header fields, parsed as apimachinery's ParseWarningHeaders and
logged as client-go's default WarningLogger."""

from __future__ import annotations

import logging

import pytest
from kube_fakes import Request, Response, make_client
from multidict import MultiDict

from kubesched.kube._warnings import parse_warnings


def test_several_fields_several_warnings_and_a_malformed_one() -> None:
    # apimachinery's TestParseWarningHeaders "multi-header with error".
    assert parse_warnings(
        [
            '299 - "warning 1.1",299 - "warning 1.2"',
            '299 - "warning 2", 299 - "warning unquoted',
            ' 299 - "warning 3.1" ,  299 - "warning 3.2" ',
        ]
    ) == [
        (299, "warning 1.1"),
        (299, "warning 1.2"),
        (299, "warning 2"),
        (299, "warning 3.1"),
        (299, "warning 3.2"),
    ]


def test_dates_escapes_and_bad_codes() -> None:
    assert parse_warnings(['199 agent "a \\"quoted\\" word" "Wed, 21 Oct 2015 07:28:00 GMT"']) == [
        (199, 'a "quoted" word')
    ]
    assert parse_warnings(['29 - "short code"', '299 - "bad\x01text"']) == []


async def test_each_299_warning_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def handler(request: Request) -> Response:
        fields = [("Warning", '299 - "first"'), ("Warning", '299 - "second", 199 - "other"')]
        return Response(200, content=b"{}", headers=MultiDict(fields))

    with caplog.at_level(logging.INFO, logger="kubesched.kube"):
        async with make_client(handler) as client:
            await client.get("/api/v1/pods")
            async with client.stream("/api/v1/pods", params={"watch": True}) as lines:
                assert [line async for line in lines] == [b"{}"]
    logged = [r.getMessage() for r in caplog.records if r.name == "kubesched.kube._warnings"]
    assert logged == ["Warning: first", "Warning: second"] * 2
