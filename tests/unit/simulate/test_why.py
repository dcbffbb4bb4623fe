"""``kubesched why`` on manifests: rejections, closest nodes, and each way out checked."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from kubesched.cli import main
from kubesched.config import default_config
from kubesched.plugins import default_registry
from kubesched.simulate import WhyReport, load_text, only_pod, why


def _node(name: str, cpu: str, zone: str, extra: str = "") -> str:
    return textwrap.dedent(f"""
        kind: Node
        metadata:
          name: {name}
          labels: {{topology.kubernetes.io/zone: {zone}, kubernetes.io/hostname: {name}}}
        spec: {{{extra}}}
        status: {{allocatable: {{cpu: "{cpu}", memory: 16Gi, pods: "110"}}}}
        """)


def _pod(name: str, cpu: str, extra: str = "", node: str = "") -> str:
    node_name = f"nodeName: {node}, " if node else ""
    return textwrap.dedent(f"""
        kind: Pod
        metadata: {{name: {name}}}
        spec: {{{node_name}{extra}
          containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]}}
        """)


def _report(*docs: str, pod: str) -> WhyReport:
    inputs = load_text("---".join(docs))
    assert not inputs.errors, inputs.errors
    one = only_pod(inputs, "default", pod)
    return asyncio.run(why(one, default_config(), default_registry(), seed=1))


def _ways(report: WhyReport) -> dict[str, list[str]]:
    return {w.kind: w.nodes for w in report.ways_out}


def test_counts_every_rejecting_plugin_and_the_first() -> None:
    report = _report(
        _node("a", "2", "z1"),
        _node("t", "2", "z1", "taints: [{key: dedicated, value: gpu, effect: NoSchedule}]"),
        _node("c", "8", "z1", "unschedulable: true"),
        _pod("big", "4"),
        pod="big",
    )
    assert report.reason == "Unschedulable"
    by = {r.plugin: (r.first, r.any) for r in report.rejections}
    # t: TaintToleration first, NodeResourcesFit too; c: cordoned only; a: too small.
    assert by == {
        "NodeResourcesFit": (1, 2),
        "TaintToleration": (1, 1),
        "NodeUnschedulable": (1, 1),
    }
    closest = {n.name: list(n.blocked_by) for n in report.closest}
    assert closest["t"] == ["TaintToleration", "NodeResourcesFit"]
    assert report.closest[0].name == "c"  # one plugin, no shortfall
    assert _ways(report)["uncordon"] == ["c"]


def test_toleration_way_out_is_checked() -> None:
    report = _report(
        _node("a", "1", "z1"),
        _node("g1", "8", "z1", "taints: [{key: dedicated, value: gpu, effect: NoSchedule}]"),
        _node("g2", "8", "z2", "taints: [{key: dedicated, value: gpu, effect: NoSchedule}]"),
        _pod("p", "2"),
        pod="p",
    )
    way = next(w for w in report.ways_out if w.kind == "toleration")
    assert way.nodes == ["g1", "g2"]
    assert "`dedicated=gpu:NoSchedule`" in way.text
    assert way.detail["toleration"] == {
        "key": "dedicated",
        "operator": "Equal",
        "value": "gpu",
        "effect": "NoSchedule",
    }


def test_smaller_request_names_the_node_needing_the_smallest_cut() -> None:
    report = _report(
        _node("a", "4", "z1"),
        _node("b", "4", "z1"),
        _pod("r1", "3", node="a"),
        _pod("r2", "1500m", node="b"),
        _pod("p", "3"),
        pod="p",
    )
    way = next(w for w in report.ways_out if w.kind == "smallerRequest")
    assert way.detail == {"node": "b", "requests": {"cpu": "2500m"}}
    assert "b" in way.nodes
    assert "cpu request were at most 2500m (now 3)" in way.text


def test_preemption_names_victims_and_priorities() -> None:
    report = _report(
        _node("a", "4", "z1"),
        "\nkind: PriorityClass\napiVersion: scheduling.k8s.io/v1\n"
        "metadata: {name: high}\nvalue: 100\n",
        _pod("low", "3", node="a", extra="priority: 10,"),
        _pod("high", "2", extra="priorityClassName: high,"),
        pod="high",
    )
    way = next(w for w in report.ways_out if w.kind == "preemption")
    assert way.nodes == ["a"]
    assert way.detail["victims"] == [{"pod": "default/low", "priority": 10}]
    assert "(priority 10 < 100)" in way.text
    # Today it fits nowhere: the report is of the pod as it waits, not after the eviction.
    assert (report.reason, report.node) == ("Unschedulable", None)
    assert report.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_node_affinity_way_out() -> None:
    report = _report(
        _node("a", "4", "z1"),
        _pod("p", "1", extra="nodeSelector: {disk: ssd},"),
        pod="p",
    )
    assert _ways(report) == {"noNodeAffinity": ["a"]}


def test_volume_zone_tells_what_stops_the_pod_in_its_zone() -> None:
    pv = textwrap.dedent("""
        kind: PersistentVolume
        metadata: {name: pv1, labels: {topology.kubernetes.io/zone: z1}}
        spec:
          capacity: {storage: 1Gi}
          accessModes: [ReadWriteOnce]
          claimRef: {namespace: default, name: data}
          gcePersistentDisk: {pdName: d1}
        status: {phase: Bound}
        ---
        kind: PersistentVolumeClaim
        metadata:
          name: data
          namespace: default
          annotations: {pv.kubernetes.io/bind-completed: "yes"}
        spec: {accessModes: [ReadWriteOnce], volumeName: pv1, resources: {requests: {storage: 1Gi}}}
        status: {phase: Bound}
        """)
    report = _report(
        _node("a", "1", "z1"),
        _node("b", "8", "z2"),
        pv,
        _pod("p", "2", extra="volumes: [{name: v, persistentVolumeClaim: {claimName: data}}],"),
        pod="p",
    )
    way = next(w for w in report.ways_out if w.kind == "volumeZone")
    assert way.detail == {"zones": ["z1"], "nodes": 1, "rejectedBy": {"NodeResourcesFit": 1}}
    assert "zone z1" in way.text


def test_a_pod_that_fits_says_where() -> None:
    report = _report(_node("a", "4", "z1"), _pod("p", "1"), pod="p")
    assert report.reason == "Scheduled"
    assert report.node == "a"
    assert not report.ways_out


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["why", *args], catch_exceptions=False)


def test_cli_table_and_json(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("---".join([_node("a", "1", "z1"), _pod("p", "2"), _pod("q", "1")]))
    table = _invoke("p", "-f", str(f))
    assert table.exit_code == 0, table.output
    assert "NodeResourcesFit" in table.stdout
    assert "if its cpu request were at most 1 (now 2)" in table.stdout
    doc = json.loads(_invoke("p", "-f", str(f), "-o", "json").stdout)
    assert doc["reason"] == "Unschedulable"
    assert doc["rejections"][0] == {
        "plugin": "NodeResourcesFit",
        "first": 1,
        "any": 1,
        "reasons": {"Insufficient cpu": 1},
    }
    assert doc["waysOut"][0]["kind"] == "smallerRequest"


def test_cli_errors_name_the_pod(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("---".join([_node("a", "1", "z1"), _pod("r", "1", node="a")]))
    missing = CliRunner().invoke(main, ["why", "nope", "-f", str(f)])
    assert missing.exit_code == 1
    assert 'pod "nope" not found in namespace "default"' in missing.stderr
    bound = CliRunner().invoke(main, ["why", "r", "-f", str(f)])
    assert bound.exit_code == 1
    assert "bound to node a" in bound.stderr
    usage = CliRunner().invoke(main, ["why", "r", "--from-cluster"])
    assert usage.exit_code == 2


def test_cli_without_config_judges_any_scheduler_name(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("---".join([_node("a", "1", "z1"), _pod("p", "2", extra="schedulerName: mine,")]))
    doc = json.loads(_invoke("p", "-f", str(f), "-o", "json").stdout)
    assert (doc["schedulerName"], doc["reason"]) == ("mine", "Unschedulable")


def test_each_reason_is_counted_as_the_message_counts_it() -> None:
    report = _report(
        _node("a", "1", "z1"),
        _node("b", "1", "z1"),
        textwrap.dedent("""
            kind: Pod
            metadata: {name: p}
            spec:
              containers: [{name: c, resources: {requests: {cpu: "2", memory: 20Gi}}}]
            """),
        pod="p",
    )
    (fit,) = report.rejections
    assert fit.reasons == {"Insufficient cpu": 2, "Insufficient memory": 2}
    assert report.message.startswith(
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
    )
    assert report.closest[0].blocked_by == {
        "NodeResourcesFit": "Insufficient cpu, Insufficient memory"
    }
