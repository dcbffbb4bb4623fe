"""Trimaran in the extender: prioritize with LoadVariationRiskBalancing over load served by a
small stand-in for Prometheus's HTTP API (scores worked in tests/unit/plugins/test_trimaran.py)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from typing import Any, ClassVar

from extender_fakes import config, make_extender, make_pod, names_body, nodes

from kubesched.plugins.trimaran import LoadVariationRiskBalancing


class _Prometheus(http.server.BaseHTTPRequestHandler):
    """Answers load-watcher's four queries: node -> (cpu avg, cpu std, memory avg, memory std)
    as ratios."""

    load: ClassVar[dict[str, tuple[float, float, float, float]]] = {
        "n-1": (0.25, 0.10, 0.50, 0.05),
        "n-2": (0.90, 0.0, 0.875, 0.0),
    }
    column: ClassVar[dict[str, int]] = {
        "avg_over_time(instance:node_cpu:ratio[900s])": 0,
        "stddev_over_time(instance:node_cpu:ratio[900s])": 1,
        "avg_over_time(instance:node_memory_utilisation:ratio[900s])": 2,
        "stddev_over_time(instance:node_memory_utilisation:ratio[900s])": 3,
    }

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        query = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))["query"]
        i = self.column[query]
        result = [
            {"metric": {"instance": node}, "value": [0, str(v[i])]} for node, v in self.load.items()
        ]
        body = json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_in_the_extender_prioritize_scores_the_load() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"http://127.0.0.1:{server.server_address[1]}"
        cfg = config(
            "LoadVariationRiskBalancing",
            pluginConfig=[
                {
                    "name": "LoadVariationRiskBalancing",
                    "args": {"metricProvider": {"type": "Prometheus", "address": address}},
                }
            ],
        )
        ext = make_extender(cfg, nodes=nodes("n-1", "n-2", cpu="4", memory="8Gi"))
        plugin = ext.cluster_profiles["test"].plugin("LoadVariationRiskBalancing")
        assert isinstance(plugin, LoadVariationRiskBalancing)
        assert plugin.refresher.refresh_once(), plugin.refresher.last_error
        body = names_body(make_pod("p", cpu="1", memory="1Gi"), ["n-1", "n-2"])
        reply = ext.prioritize("test", body)
        assert reply.status == 200, reply.body
        # n-1: 66 (worked above); n-2: cpu and memory both at mu 1: 50. Scaled to 0..10.
        assert json.loads(reply.body) == [{"Host": "n-1", "Score": 7}, {"Host": "n-2", "Score": 5}]
        plugin.close()
    finally:
        server.shutdown()
        server.server_close()
