"""NetworkTraffic: prefer nodes that receive less network traffic, as Prometheus measures it.

The scheduler-plugins tutorial's plugin, with a query that measures traffic (a rate, not a sum
of counter values), and never in the scheduling cycle: a background thread refreshes the answer,
Score only reads it, and missing or stale data scores every node a neutral 50. The formula, the
query and the metrics: docs/plugins/network-traffic.md.

This module also holds :class:`PrometheusClient`, the small HTTP client (standard library only)
that ``kubesched annotate-nodes`` uses as well.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
import numpy as np
from prometheus_client import Counter, Gauge

from kubesched import KubeschedError
from kubesched.api import Pod
from kubesched.config import Duration, FieldError, decode_args, format_duration
from kubesched.framework import (
    CycleState,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    ScorePlugin,
    Status,
)

NAME = "NetworkTraffic"

MAX_NODE_SCORE = 100
#: The score of a node without data, and of every node while the data is missing or stale.
NEUTRAL_SCORE = MAX_NODE_SCORE // 2

DEFAULT_NODE_LABEL = "kubernetes_node"
DEFAULT_TIME_RANGE_MINUTES = 5
DEFAULT_REFRESH_INTERVAL = 30.0
DEFAULT_MAX_DATA_AGE = 120.0
DEFAULT_REQUEST_TIMEOUT = 10.0
#: The label ``node_uname_info`` carries the node's host name in.
UNAME_NODE_LABEL = "nodename"

#: Traffic above this is clamped, so that ``traffic * 100`` stays within int64.
_MAX_TRAFFIC = (2**63 - 1) // MAX_NODE_SCORE
_UNKNOWN = -1
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

log = logging.getLogger(__name__)

REFRESHES = Counter(
    "kubesched_network_traffic_refreshes",
    "Queries NetworkTraffic sent to Prometheus, by result (success, error).",
    ["profile", "result"],
)
NEUTRAL_SCORES = Counter(
    "kubesched_network_traffic_neutral_scores",
    "Nodes NetworkTraffic scored neutrally, by reason: missing (no answer from Prometheus yet), "
    "stale (the last answer is older than maxDataAge), unknown_node (not in the answer).",
    ["profile", "reason"],
)
DATA_AGE = Gauge(
    "kubesched_network_traffic_data_age_seconds",
    "Age of the traffic data NetworkTraffic scores with (-1 before the first answer).",
    ["profile"],
)


# --- a small Prometheus HTTP API client ---------------------------------------------------------


class PrometheusError(KubeschedError):
    """A query that failed: connection, HTTP status, or an error answer from Prometheus."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One element of an instant vector."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Series:
    """One element of a range vector: ``(timestamp, value)`` points."""

    labels: Mapping[str, str]
    points: list[tuple[float, float]]


@dataclass(slots=True)
class PrometheusClient:
    """``/api/v1/query`` and ``/api/v1/query_range`` of one Prometheus server.

    ``bearer_token_file`` is read again for every request (service account tokens rotate).
    ``ca_file`` verifies an HTTPS server; ``basic_auth`` may also come from the URL
    (``https://user:password@host``).
    """

    address: str
    bearer_token: str = ""
    bearer_token_file: str = ""
    ca_file: str = ""
    timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: Accept any certificate of an HTTPS server (load-watcher's ``insecureSkipVerify``).
    insecure_skip_verify: bool = False
    _base: str = field(init=False, default="")
    _basic: str = field(init=False, default="")
    _context: ssl.SSLContext | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.address)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PrometheusError(f"not an http(s) URL: {self.address!r}")
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port is not None:
            netloc += f":{parts.port}"
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            self._basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        if parts.scheme == "https":
            self._context = ssl.create_default_context(cafile=self.ca_file or None)
            if self.insecure_skip_verify:
                self._context.check_hostname = False
                self._context.verify_mode = ssl.CERT_NONE

    @property
    def base_url(self) -> str:
        """The server's URL without credentials."""
        return self._base

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        token = self.bearer_token
        if self.bearer_token_file:
            try:
                token = Path(self.bearer_token_file).read_text().strip()
            except OSError as err:
                raise PrometheusError(f"cannot read bearer token file: {err}") from err
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif self._basic:
            headers["Authorization"] = f"Basic {self._basic}"
        return headers

    def _call(self, endpoint: str, params: Mapping[str, str]) -> Any:
        request = urllib.request.Request(
            f"{self._base}/api/v1/{endpoint}",
            data=urllib.parse.urlencode(params).encode(),
            headers=self._headers(),
            method="POST",
        )
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self._context
            ) as answer:
                body = answer.read()
        except urllib.error.HTTPError as err:
            raise PrometheusError(f"HTTP {err.code}: {_error_text(err.read())}") from err
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise PrometheusError(f"cannot reach {self._base}: {reason}") from err
        try:
            doc = msgspec.json.decode(body)
        except msgspec.DecodeError as err:
            raise PrometheusError(f"not a Prometheus API answer: {body[:200]!r}") from err
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise PrometheusError(_error_text(body))
        data = doc.get("data")
        if not isinstance(data, dict):
            raise PrometheusError("answer without data")
        return data

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query; its result must be a vector."""
        params = {"query": expr}
        if at is not None:
            params["time"] = _fmt_time(at)
        data = self._call("query", params)
        if data.get("resultType") != "vector":
            raise PrometheusError(f"expected a vector, got {data.get('resultType')!r}")
        out = []
        for item in _items(data):
            value = item.get("value")
            if not isinstance(value, list) or len(value) != 2:
                raise PrometheusError(f"malformed sample: {item!r}")
            out.append(Sample(_labels(item), _number(value[1])))
        return out

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """A range query from ``start`` to ``end`` (epoch seconds) every ``step`` seconds."""
        data = self._call(
            "query_range",
            {
                "query": expr,
                "start": _fmt_time(start),
                "end": _fmt_time(end),
                "step": _fmt_time(step),
            },
        )
        if data.get("resultType") != "matrix":
            raise PrometheusError(f"expected a matrix, got {data.get('resultType')!r}")
        out = []
        for item in _items(data):
            values = item.get("values")
            if not isinstance(values, list):
                raise PrometheusError(f"malformed series: {item!r}")
            points = []
            for point in values:
                if not isinstance(point, list) or len(point) != 2:
                    raise PrometheusError(f"malformed point: {point!r}")
                points.append((float(point[0]), _number(point[1])))
            out.append(Series(_labels(item), points))
        return out


def _fmt_time(t: float) -> str:
    return f"{t:.3f}"


def _items(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    result = data.get("result")
    if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
        raise PrometheusError("malformed result")
    return result


def _labels(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric", {})
    if not isinstance(metric, dict):
        raise PrometheusError(f"malformed labels: {metric!r}")
    return {str(k): str(v) for k, v in metric.items()}


def _number(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError) as err:
        raise PrometheusError(f"not a sample value: {text!r}") from err


def _error_text(body: bytes) -> str:
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body[:200].decode(errors="replace")
    if isinstance(doc, dict) and doc.get("error"):
        return f"{doc.get('errorType', 'error')}: {doc['error']}"
    return body[:200].decode(errors="replace")


def promql_string(text: str) -> str:
    """``text`` as a double-quoted PromQL string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- args -------------------------------------------------------------------------------------


class NetworkTrafficArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``NetworkTraffic``; see the module docstring and docs/plugins/network-traffic.md."""

    #: Prometheus's URL (``http://prometheus.monitoring:9090``); required.
    prometheus_address: str = ""
    #: A bearer token, or a file to read it from before each query (not both).
    bearer_token: str = ""
    bearer_token_file: str = ""
    #: CA bundle that signed an HTTPS Prometheus's certificate (default: the system's).
    ca_file: str = ""
    #: The ``device`` to count, as a PromQL regular expression; empty: every device but ``lo``.
    network_interface: str = ""
    #: The window of ``rate()``, in minutes.
    time_range_in_minutes: int = DEFAULT_TIME_RANGE_MINUTES
    #: The label carrying the Kubernetes node name on the node exporter's series.
    node_label: str = DEFAULT_NODE_LABEL
    #: Take node names from ``node_uname_info``'s ``nodename`` (joined on ``instance``) instead.
    use_node_uname_info: bool = False
    #: A PromQL expression replacing the built-in one: an instant vector, one sample per node,
    #: the node's name in ``nodeLabel``, larger values for busier nodes.
    query: str = ""
    #: How often the background thread queries Prometheus.
    refresh_interval: Duration = DEFAULT_REFRESH_INTERVAL
    #: Data older than this is not used (every node then scores neutrally).
    max_data_age: Duration = DEFAULT_MAX_DATA_AGE
    #: Timeout of one query.
    request_timeout: Duration = DEFAULT_REQUEST_TIMEOUT

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        address = self.prometheus_address
        if not address:
            errors.append(FieldError.required(f"{path}.prometheusAddress"))
        else:
            parts = urllib.parse.urlsplit(address)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                errors.append(
                    FieldError.invalid(
                        f"{path}.prometheusAddress", address, "must be an http:// or https:// URL"
                    )
                )
        if self.bearer_token and self.bearer_token_file:
            errors.append(
                FieldError.forbidden(
                    f"{path}.bearerTokenFile", "may not be set together with bearerToken"
                )
            )
        if self.network_interface:
            try:
                re.compile(self.network_interface)
            except re.error as err:
                errors.append(
                    FieldError.invalid(
                        f"{path}.networkInterface", self.network_interface, f"not a regex: {err}"
                    )
                )
        if self.time_range_in_minutes < 1:
            errors.append(
                FieldError.invalid(
                    f"{path}.timeRangeInMinutes", self.time_range_in_minutes, "must be at least 1"
                )
            )
        if not _LABEL_NAME.match(self.node_label):
            errors.append(
                FieldError.invalid(
                    f"{path}.nodeLabel", self.node_label, "must be a Prometheus label name"
                )
            )
        if self.query and self.use_node_uname_info:
            errors.append(
                FieldError.forbidden(
                    f"{path}.useNodeUnameInfo", "applies to the built-in query, not to query"
                )
            )
        if self.query and self.network_interface:
            errors.append(
                FieldError.forbidden(
                    f"{path}.networkInterface", "applies to the built-in query, not to query"
                )
            )
        for name, value in (
            ("refreshInterval", self.refresh_interval),
            ("requestTimeout", self.request_timeout),
        ):
            if value <= 0:
                errors.append(
                    FieldError.invalid(f"{path}.{name}", format_duration(value), "must be positive")
                )
        if self.max_data_age < self.refresh_interval:
            errors.append(
                FieldError.invalid(
                    f"{path}.maxDataAge",
                    format_duration(self.max_data_age),
                    "must be at least refreshInterval",
                )
            )
        return errors


def traffic_query(args: NetworkTrafficArgs) -> tuple[str, str]:
    """The PromQL the plugin sends, and the label that names the node in its answer."""
    if args.query:
        return args.query, args.node_label
    if args.network_interface:
        selector = f"{{device=~{promql_string(args.network_interface)}}}"
    else:
        selector = '{device!="lo"}'
    rate = f"rate(node_network_receive_bytes_total{selector}[{args.time_range_in_minutes}m])"
    if args.use_node_uname_info:
        joined = f"{rate} * on(instance) group_left({UNAME_NODE_LABEL}) node_uname_info"
        return f"sum by ({UNAME_NODE_LABEL}) ({joined})", UNAME_NODE_LABEL
    return f"sum by ({args.node_label}) ({rate})", args.node_label


# --- the background refresher -------------------------------------------------------------------


#: What a refresher keeps per node: bytes per second here, load statistics for Trimaran.
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class TrafficData(Generic[V]):
    """One answer: node name -> value (bytes per second), and when it arrived (monotonic
    seconds)."""

    traffic: Mapping[str, V]
    fetched_at: float


class TrafficRefresher(Generic[V]):
    """Calls ``fetch`` every ``interval`` seconds on a daemon thread and keeps the last answer.

    The scheduling cycle only reads :attr:`data` (an immutable snapshot, replaced whole), so it
    never waits for the network.
    """

    def __init__(
        self,
        fetch: Callable[[], Mapping[str, V]],
        interval: float,
        *,
        name: str = "traffic",
        clock: Callable[[], float] = time.monotonic,
        on_result: Callable[[bool, str], None] | None = None,
    ) -> None:
        self._fetch = fetch
        self._interval = interval
        self._name = name
        self._clock = clock
        self._on_result = on_result
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.data: TrafficData[V] | None = None
        self.last_error: str = ""
        self.successes = 0
        self.failures = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread, once (later calls do nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh_once()
            self._stop.wait(self._interval)

    def refresh_once(self) -> bool:
        """One query; keeps the answer on success. Returns whether it succeeded."""
        try:
            traffic = dict(self._fetch())
        except Exception as err:  # any failure of the source must not kill the thread
            self.failures += 1
            self.last_error = str(err) or type(err).__name__
            if self._on_result is not None:
                self._on_result(False, self.last_error)
            return False
        self.data = TrafficData(traffic, self._clock())
        self.successes += 1
        self.last_error = ""
        if self._on_result is not None:
            self._on_result(True, f"{len(traffic)} nodes")
        return True


def traffic_by_node(samples: list[Sample], label: str) -> dict[str, float]:
    """Node name -> traffic from a query's samples: samples of one node add up; samples without
    the label, or whose value is NaN or infinite, are left out; negative values count as 0."""
    out: dict[str, float] = {}
    for s in samples:
        node = s.labels.get(label)
        if not node or not math.isfinite(s.value):
            continue
        out[node] = out.get(node, 0.0) + max(s.value, 0.0)
    return out


# --- the plugin ---------------------------------------------------------------------------------


def normalize_traffic(scores: IntArray) -> None:
    """NormalizeScore in place: ``100 - t * 100 // max`` for known traffic ``t >= 0``;
    :data:`NEUTRAL_SCORE` for unknown nodes (``-1``); 100 for all known when ``max == 0``."""
    known = scores >= 0
    if known.any():
        top = int(scores[known].max())
        if top == 0:
            scores[known] = MAX_NODE_SCORE
        else:
            scores[known] = MAX_NODE_SCORE - scores[known] * MAX_NODE_SCORE // top
    scores[~known] = NEUTRAL_SCORE


class NetworkTraffic(ScorePlugin):
    """Scores nodes by received bytes per second: less traffic, higher score."""

    name = NAME
    args_type = NetworkTrafficArgs

    def __init__(
        self,
        handle: Handle,
        args: Any = None,
        *,
        fetch: Callable[[], Mapping[str, float]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        decoded = decode_args(NetworkTrafficArgs, args)
        super().__init__(handle, decoded)
        self.query, self.node_label = traffic_query(decoded)
        self.max_data_age = decoded.max_data_age
        self._clock = clock
        self._profile = handle.profile_name
        if fetch is None:
            client = PrometheusClient(
                decoded.prometheus_address,
                bearer_token=decoded.bearer_token,
                bearer_token_file=decoded.bearer_token_file,
                ca_file=decoded.ca_file,
                timeout=decoded.request_timeout,
            )
            self.address = client.base_url

            def fetch() -> Mapping[str, float]:
                return traffic_by_node(client.query(self.query), self.node_label)

        else:
            self.address = decoded.prometheus_address
        self.refresher = TrafficRefresher(
            fetch,
            decoded.refresh_interval,
            name=f"{NAME}-{self._profile}",
            clock=clock,
            on_result=self._on_result,
        )
        self._source_ok: bool | None = None
        self._usable: bool | None = None
        self._reason = ""
        #: Nodes scored neutrally, by reason (also ``kubesched_network_traffic_neutral_scores``).
        self.neutral: dict[str, int] = {}
        DATA_AGE.labels(self._profile).set_function(self.data_age)

    # -- reporting -------------------------------------------------------------------------------

    def _on_result(self, ok: bool, detail: str) -> None:
        REFRESHES.labels(self._profile, "success" if ok else "error").inc()
        if ok:
            if self._source_ok is not True:
                log.info("%s: traffic of %s from %s", NAME, detail, self.address)
            else:
                log.debug("%s: traffic of %s from %s", NAME, detail, self.address)
        elif self._source_ok is not False:
            log.warning("%s: query to %s failed: %s", NAME, self.address, detail)
        else:
            log.debug("%s: query to %s failed again: %s", NAME, self.address, detail)
        self._source_ok = ok

    def data_age(self) -> float:
        """Seconds since the data in use arrived; -1 before the first answer."""
        data = self.refresher.data
        return -1.0 if data is None else self._clock() - data.fetched_at

    def _count(self, reason: str, n: int) -> None:
        if n:
            self.neutral[reason] = self.neutral.get(reason, 0) + n
            NEUTRAL_SCORES.labels(self._profile, reason).inc(n)

    def usable_data(self) -> TrafficData[float] | None:
        """The data to score with, or ``None`` (missing or stale), reporting changes."""
        self.refresher.start()
        data = self.refresher.data
        reason = ""
        if data is None:
            reason = "missing"
        elif self._clock() - data.fetched_at > self.max_data_age:
            reason = "stale"
        usable = not reason
        if usable != self._usable:
            if not usable:
                age = "" if data is None else f" (last answer {self.data_age():.0f}s old)"
                log.warning(
                    "%s: no current traffic data from %s%s: every node scores %d until there "
                    "is; last error: %s",
                    NAME,
                    self.address,
                    age,
                    NEUTRAL_SCORE,
                    self.refresher.last_error or "none yet",
                )
            elif self._usable is not None:
                log.info("%s: current traffic data again from %s", NAME, self.address)
            self._usable = usable
        self._reason = reason
        return data if usable else None

    # -- Score -----------------------------------------------------------------------------------

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        data = self.usable_data()
        if data is None:
            self._count(self._reason, len(nodes))
            return np.full(len(nodes), _UNKNOWN, dtype=np.int64), None
        traffic = data.traffic
        scores = np.fromiter(
            (_raw(traffic.get(name)) for name in nodes.names()), dtype=np.int64, count=len(nodes)
        )
        self._count("unknown_node", int((scores == _UNKNOWN).sum()))
        return scores, None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        data = self.usable_data()
        if data is None:
            self._count(self._reason, 1)
            return _UNKNOWN, None
        value = _raw(data.traffic.get(node.name))
        if value == _UNKNOWN:
            self._count("unknown_node", 1)
        return value, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        normalize_traffic(scores)
        return None

    def close(self) -> None:
        """Stop the background thread."""
        self.refresher.stop()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def _raw(value: float | None) -> int:
    """The Score of a node: its traffic truncated to an integer, or ``-1`` when unknown."""
    if value is None:
        return _UNKNOWN
    return min(int(value), _MAX_TRAFFIC)


__all__ = [
    "DEFAULT_NODE_LABEL",
    "NAME",
    "NEUTRAL_SCORE",
    "NetworkTraffic",
    "NetworkTrafficArgs",
    "PrometheusClient",
    "PrometheusError",
    "Sample",
    "Series",
    "TrafficData",
    "TrafficRefresher",
    "normalize_traffic",
    "promql_string",
    "traffic_by_node",
    "traffic_query",
]
