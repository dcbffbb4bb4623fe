"""APIClient keeps at most max_in_flight requests on the wire; watches do not count."""

from __future__ import annotations

import asyncio

from kube_fakes import Request, Response, make_client


async def test_requests_beyond_the_limit_wait_their_turn() -> None:
    inside = 0
    peak = 0

    async def handler(request: Request) -> Response:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        await asyncio.sleep(0.01)
        inside -= 1
        return Response(201, content=b"{}")

    async with make_client(handler, qps=0, burst=1, max_in_flight=3) as client:
        results = await asyncio.gather(*(client.post("/api/v1/x", b"{}") for _ in range(20)))
    assert results == [b"{}"] * 20
    assert peak == 3


async def test_watches_do_not_take_slots() -> None:
    async def handler(request: Request) -> Response:
        if request.url.params.get("watch"):
            return Response(200, content=b'{"type":"BOOKMARK"}\n')
        return Response(200, content=b"{}")

    client = make_client(handler, qps=0, burst=1, max_in_flight=1)
    async with client, client.stream("/api/v1/pods", params={"watch": "1"}) as lines:
        # A request still gets through while the watch is open.
        assert await asyncio.wait_for(client.get("/api/v1/pods/x"), 5) == b"{}"
        assert [line async for line in lines] == [b'{"type":"BOOKMARK"}']
