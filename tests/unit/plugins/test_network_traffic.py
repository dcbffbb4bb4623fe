"""NetworkTraffic: ``100 - traffic * 100 // max`` worked by hand, unknown nodes at 50, missing and
stale data (every node neutral, reported), the queries it builds, and its Prometheus client
against a small HTTP server."""

from __future__ import annotations

import http.server
import json
import random
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.config import ConfigError
from kubesched.framework import CycleState, Framework, Nodes, Registry, Snapshot
from kubesched.plugins.default_binder import DefaultBinder
from kubesched.plugins.network_traffic import (
    NEUTRAL_SCORE,
    NetworkTraffic,
    NetworkTrafficArgs,
    PrometheusClient,
    PrometheusError,
    Sample,
    normalize_traffic,
    traffic_by_node,
    traffic_query,
)
from kubesched.plugins.priority_sort import PrioritySort

ADDRESS = "http://prometheus.invalid:9090"


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.profile_name = "test"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """A fetch function whose answer (or failure) the test sets."""

    def __init__(self, traffic: Mapping[str, float] | None = None) -> None:
        self.traffic = dict(traffic or {})
        self.error: Exception | None = None
        self.calls = 0

    def __call__(self) -> Mapping[str, float]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return dict(self.traffic)


def snapshot(*names: str) -> Snapshot:
    snap = Snapshot()
    for name in names:
        snap.set_node(make_node(name))
    return snap


@pytest.fixture
def plugin_for() -> Iterator[Callable[..., NetworkTraffic]]:
    made: list[NetworkTraffic] = []

    def make(
        snap: Snapshot, source: Source, clock: Clock, args: Mapping[str, Any] | None = None
    ) -> NetworkTraffic:
        # A long refresh interval: the background thread queries once, the test drives the rest.
        plugin = NetworkTraffic(
            _Handle(snap),
            {
                "prometheusAddress": ADDRESS,
                "refreshInterval": "1h",
                "maxDataAge": "2h",
                **(args or {}),
            },
            fetch=source,
            clock=clock,
        )
        made.append(plugin)
        return plugin

    yield make
    for p in made:
        p.close()


def scores(plugin: NetworkTraffic, snap: Snapshot) -> list[int]:
    nodes = Nodes(snap, snap.present_slots())
    state = CycleState()
    raw, status = plugin.score_nodes(state, make_pod("p"), nodes)
    assert status is None
    assert plugin.normalize_score(state, make_pod("p"), nodes, raw) is None
    return list(raw.tolist())


def test_normalize_by_hand() -> None:
    # 100 - t * 100 // 4000 for 1000, 3000, 4000, 0: 75, 25, 0, 100; unknown (-1): 50
    s = np.array([1000, 3000, 4000, 0, -1], dtype=np.int64)
    normalize_traffic(s)
    assert s.tolist() == [75, 25, 0, 100, NEUTRAL_SCORE]
    # integer division: 100 - 1 * 100 // 3 = 100 - 33 = 67
    s = np.array([1, 3], dtype=np.int64)
    normalize_traffic(s)
    assert s.tolist() == [67, 0]
    # max 0: every known node is idle, 100
    s = np.array([0, 0, -1], dtype=np.int64)
    normalize_traffic(s)
    assert s.tolist() == [100, 100, 50]


def test_scores_from_the_cache(plugin_for: Callable[..., NetworkTraffic]) -> None:
    snap = snapshot("a", "b", "c", "d")
    # fractions are truncated first: 999.9 -> 999
    source = Source({"a": 999.9, "b": 3000.0, "c": 4000.0, "elsewhere": 9e9})
    plugin = plugin_for(snap, source, Clock())
    assert plugin.refresher.refresh_once()
    # 100 - 999 * 100 // 4000 = 100 - 24 = 76; d is unknown: 50
    assert scores(plugin, snap) == [76, 25, 0, 50]
    assert plugin.neutral == {"unknown_node": 1}
    infos = list(Nodes(snap, snap.present_slots()).infos())
    assert [plugin.score(CycleState(), make_pod("p"), i)[0] for i in infos] == [999, 3000, 4000, -1]


def test_missing_data_scores_every_node_neutral(plugin_for: Callable[..., NetworkTraffic]) -> None:
    snap = snapshot("a", "b")
    source = Source()
    source.error = PrometheusError("cannot reach prometheus")
    plugin = plugin_for(snap, source, Clock())
    assert not plugin.refresher.refresh_once()
    assert scores(plugin, snap) == [50, 50]
    assert plugin.neutral == {"missing": 2}
    assert plugin.refresher.last_error == "cannot reach prometheus"
    assert plugin.data_age() == -1.0


def test_stale_data_scores_every_node_neutral_until_refreshed(
    plugin_for: Callable[..., NetworkTraffic],
) -> None:
    snap = snapshot("a", "b")
    clock = Clock()
    source = Source({"a": 100.0, "b": 300.0})
    plugin = plugin_for(snap, source, clock, {"refreshInterval": "30s", "maxDataAge": "2m"})
    plugin.refresher.refresh_once()
    assert scores(plugin, snap) == [67, 0]
    clock.now += 120  # exactly the limit: still used
    assert scores(plugin, snap) == [67, 0]
    assert plugin.data_age() == 120
    clock.now += 1
    source.error = PrometheusError("down")
    plugin.refresher.refresh_once()  # fails: the old answer stays, and is too old
    assert scores(plugin, snap) == [50, 50]
    assert plugin.neutral == {"stale": 2}
    source.error = None
    source.traffic = {"a": 10.0, "b": 5.0}
    plugin.refresher.refresh_once()
    assert scores(plugin, snap) == [0, 50]


def test_the_thread_refreshes_in_the_background(plugin_for: Callable[..., NetworkTraffic]) -> None:
    snap = snapshot("a")
    source = Source({"a": 1.0})
    plugin = NetworkTraffic(
        _Handle(snap), {"prometheusAddress": ADDRESS, "refreshInterval": "10ms"}, fetch=source
    )
    try:
        assert not plugin.refresher.running
        plugin.usable_data()  # the first use starts it
        assert plugin.refresher.running
        deadline = 200
        while source.calls < 3 and deadline:
            threading.Event().wait(0.01)
            deadline -= 1
        assert source.calls >= 3
    finally:
        plugin.close()
    assert not plugin.refresher.running


def test_in_a_framework(plugin_for: Callable[..., NetworkTraffic]) -> None:
    snap = snapshot("a", "b", "c")
    plugin = plugin_for(snap, Source({"a": 500.0, "b": 100.0, "c": 250.0}), Clock())
    plugin.refresher.refresh_once()
    fw = Framework(
        profile_name="net",
        registry=Registry(
            {
                "PrioritySort": PrioritySort,
                "DefaultBinder": DefaultBinder,
                "NetworkTraffic": NetworkTraffic,
            }
        ),
        plugins={
            "queueSort": [("PrioritySort", 1)],
            "score": [("NetworkTraffic", 2)],
            "bind": [("DefaultBinder", 1)],
        },
        plugin_args={"NetworkTraffic": {"prometheusAddress": ADDRESS}},
        snapshot=snap,
        rng=random.Random(0),
    )
    # swap in the test's plugin (the framework built its own, with a real client)
    real = fw.plugin("NetworkTraffic")
    assert isinstance(real, NetworkTraffic)
    fw.score_plugins[0] = plugin
    result = fw.schedule_pod(CycleState(), make_pod("p"))
    assert result.suggested_host == "b"
    # 100 - t * 100 // 500 for 500, 100, 250: 0, 80, 50; weight 2
    assert result.plugin_scores["NetworkTraffic"].tolist() == [0, 160, 100]
    real.close()


# --- queries -------------------------------------------------------------------------------


def args(**kwargs: Any) -> NetworkTrafficArgs:
    from kubesched.config import decode_args

    return decode_args(NetworkTrafficArgs, {"prometheusAddress": ADDRESS, **kwargs})


def test_queries() -> None:
    assert traffic_query(args()) == (
        'sum by (kubernetes_node) (rate(node_network_receive_bytes_total{device!="lo"}[5m]))',
        "kubernetes_node",
    )
    assert traffic_query(
        args(networkInterface="eth0|ens.*", timeRangeInMinutes=2, nodeLabel="node")
    ) == (
        'sum by (node) (rate(node_network_receive_bytes_total{device=~"eth0|ens.*"}[2m]))',
        "node",
    )
    assert traffic_query(args(useNodeUnameInfo=True, networkInterface="eth0")) == (
        "sum by (nodename) (rate(node_network_receive_bytes_total"
        '{device=~"eth0"}[5m]) * on(instance) group_left(nodename) node_uname_info)',
        "nodename",
    )
    assert traffic_query(args(query="my_traffic", nodeLabel="host")) == ("my_traffic", "host")
    # quotes and backslashes in the interface are escaped
    assert '{device=~"a\\\\.b\\"c"}' in traffic_query(args(networkInterface='a\\.b"c'))[0]


def test_traffic_by_node() -> None:
    samples = [
        Sample({"node": "a"}, 10.0),
        Sample({"node": "a"}, 5.0),
        Sample({"node": "b"}, float("nan")),
        Sample({"other": "c"}, 1.0),
        Sample({"node": "d"}, -3.0),
        Sample({"node": "e"}, float("inf")),
    ]
    assert traffic_by_node(samples, "node") == {"a": 15.0, "d": 0.0}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "args.prometheusAddress: Required value"),
        ({"prometheusAddress": "prometheus:9090"}, "must be an http:// or https:// URL"),
        (
            {"prometheusAddress": ADDRESS, "bearerToken": "t", "bearerTokenFile": "/f"},
            "args.bearerTokenFile: Forbidden: may not be set together with bearerToken",
        ),
        ({"prometheusAddress": ADDRESS, "timeRangeInMinutes": 0}, "must be at least 1"),
        ({"prometheusAddress": ADDRESS, "nodeLabel": "kubernetes.io/hostname"}, "label name"),
        ({"prometheusAddress": ADDRESS, "networkInterface": "eth("}, "not a regex"),
        (
            {"prometheusAddress": ADDRESS, "query": "q", "useNodeUnameInfo": True},
            "args.useNodeUnameInfo: Forbidden",
        ),
        (
            {"prometheusAddress": ADDRESS, "refreshInterval": "1m", "maxDataAge": "30s"},
            'args.maxDataAge: Invalid value: "30s": must be at least refreshInterval',
        ),
        ({"prometheusAddress": ADDRESS, "requestTimeout": "0s"}, "args.requestTimeout"),
    ],
)
def test_args_validation(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        NetworkTraffic(_Handle(Snapshot()), given)
    assert message in str(err.value)


# --- the Prometheus client -------------------------------------------------------------------


class _PrometheusStub(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, Any]]] = {}
    seen: ClassVar[list[tuple[str, dict[str, str], dict[str, str]]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        self.seen.append((self.path, form, dict(self.headers)))
        status, body = self.answers.get(form.get("query", ""), (200, {"status": "success"}))
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_PrometheusStub]]]:
    class Handler(_PrometheusStub):
        answers: ClassVar[dict[str, tuple[int, Any]]] = {}
        seen: ClassVar[list[tuple[str, dict[str, str], dict[str, str]]]] = []

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Handler
    finally:
        server.shutdown()
        server.server_close()


def test_client_instant_and_range_queries(
    stub: tuple[str, type[_PrometheusStub]], tmp_path: Path
) -> None:
    url, handler = stub
    handler.answers["up"] = (
        200,
        {
            "status": "success",
            "data": {
                "resultType": "vector",
                "result": [
                    {"metric": {"node": "a"}, "value": [1.5, "12.5"]},
                    {"metric": {"node": "b"}, "value": [1.5, "NaN"]},
                ],
            },
        },
    )
    handler.answers["free"] = (
        200,
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [{"metric": {"node": "a"}, "values": [[10, "1"], [25, "3"]]}],
            },
        },
    )
    token = tmp_path / "token"
    token.write_text("first\n")
    client = PrometheusClient(url + "/", bearer_token_file=str(token))
    got = client.query("up")
    assert [(s.labels, s.value) for s in got[:1]] == [({"node": "a"}, 12.5)]
    assert np.isnan(got[1].value)
    token.write_text("second")  # rotated: read again
    [series] = client.query_range("free", 10, 25, 15)
    assert series.points == [(10.0, 1.0), (25.0, 3.0)]
    (path1, form1, headers1), (path2, form2, headers2) = handler.seen
    assert (path1, form1) == ("/api/v1/query", {"query": "up"})
    assert headers1["Authorization"] == "Bearer first"
    assert path2 == "/api/v1/query_range"
    assert form2 == {"query": "free", "start": "10.000", "end": "25.000", "step": "15.000"}
    assert headers2["Authorization"] == "Bearer second"


def test_client_errors(stub: tuple[str, type[_PrometheusStub]]) -> None:
    url, handler = stub
    handler.answers["bad("] = (
        400,
        {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"},
    )
    handler.answers["scalar"] = (
        200,
        {"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}},
    )
    handler.answers["html"] = (200, b"<html>proxy</html>")
    client = PrometheusClient(url)
    with pytest.raises(PrometheusError, match="HTTP 400: bad_data: parse error at char 5"):
        client.query("bad(")
    with pytest.raises(PrometheusError, match="expected a vector, got 'scalar'"):
        client.query("scalar")
    with pytest.raises(PrometheusError, match="not a Prometheus API answer"):
        client.query("html")
    closed = PrometheusClient("http://127.0.0.1:9", timeout=2)
    with pytest.raises(PrometheusError, match=r"cannot reach http://127\.0\.0\.1:9"):
        closed.query("up")
    with pytest.raises(PrometheusError, match="not an http"):
        PrometheusClient("prometheus:9090")


def test_client_basic_auth_from_the_url(stub: tuple[str, type[_PrometheusStub]]) -> None:
    url, handler = stub
    client = PrometheusClient(url.replace("http://", "http://user:p%40ss@"))
    assert client.base_url == url
    with pytest.raises(PrometheusError):
        client.query("anything")  # the stub's default answer has no data
    assert handler.seen[0][2]["Authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss
