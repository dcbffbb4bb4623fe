"""The per-shape cache of Filter verdicts and scores decides exactly as running every plugin on
every node does: same feasible nodes, statuses, scores, totals and picks, as nodes and pods
change between cycles."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import (
    ANN_BIND_COMPLETED,
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
)
from kubesched.config import KubeSchedulerConfiguration, default_config, load_config_from_dict
from kubesched.framework import (
    CycleState,
    FitError,
    Framework,
    PodInfo,
    ScheduleResult,
    Snapshot,
    build_frameworks,
)
from kubesched.plugins import in_tree_registry

ZONES = ("z1", "z2", "z3")
IMAGE = "registry.example/app:1"


def _node(i: int, rnd: random.Random) -> Node:
    labels = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": ZONES[i % 3]}
    if rnd.random() < 0.3:
        labels["disk"] = rnd.choice(["ssd", "hdd"])
    taints: list[dict[str, str]] = []
    if rnd.random() < 0.15:
        taints.append({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
    if rnd.random() < 0.2:
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    images = [([IMAGE], 300 * 1024 * 1024)] if rnd.random() < 0.4 else []
    return make_node(
        f"n{i}",
        cpu=rnd.choice(["2", "4", "8"]),
        memory=rnd.choice(["4Gi", "16Gi", "32Gi"]),
        pods=rnd.choice(["10", "110"]),
        labels=labels,
        taints=taints,
        unschedulable=rnd.random() < 0.05,
        images=images,
    )


def _tolerating_in_zone(name: str, zone: str) -> Pod:
    return make_pod(
        name,
        cpu="200m",
        spec={
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "nodeSelector": {"topology.kubernetes.io/zone": zone},
        },
    )


def _pod(name: str, shape: int) -> Pod:
    """Pods of a few shapes; several of a shape share the cache's entries."""
    if shape == 0:
        return make_pod(name, cpu="100m", memory="200Mi")
    if shape == 1:
        return make_pod(name, cpu="1500m", memory="2Gi", image=IMAGE)
    if shape == 2:
        return _tolerating_in_zone(name, "z2")
    if shape == 3:
        return make_pod(
            name,
            cpu="100m",
            spec={
                "containers": [
                    {
                        "name": "c",
                        "image": "pause",
                        "ports": [{"containerPort": 80, "hostPort": 8080}],
                    }
                ]
            },
        )
    if shape == 4:
        return make_pod(
            name,
            memory="1Gi",
            spec={
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 50,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "disk", "operator": "In", "values": ["ssd"]}
                                    ]
                                },
                            }
                        ]
                    }
                }
            },
        )
    if shape == 5:
        # Best effort: BalancedAllocation skips it.
        return make_pod(name)
    if shape == 6:
        # Required anti-affinity: InterPodAffinity is not node-local; the plugins before it
        # are, and their verdicts come from the cache.
        return make_pod(
            name,
            cpu="100m",
            labels={"app": "db"},
            spec={
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app": "db"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                }
            },
        )
    if shape == 7:
        # Preferred pod affinity: InterPodAffinity scores (not node-local); the other Score
        # plugins' scores come from the cache.
        return make_pod(
            name,
            cpu="300m",
            labels={"app": "web"},
            spec={
                "affinity": {
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 70,
                                "podAffinityTerm": {
                                    "labelSelector": {"matchLabels": {"app": "db"}},
                                    "topologyKey": "topology.kubernetes.io/zone",
                                },
                            }
                        ]
                    }
                }
            },
        )
    if shape == 9:
        # As shape 2 but for the zone: what NodeAffinity reads differs, nothing else does.
        return _tolerating_in_zone(name, "z1")
    if shape == 10:
        return make_pod(
            name, cpu="300m", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]}
        )
    if shape == 11:
        return make_pod(
            name,
            cpu="100m",
            spec={
                "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
            },
        )
    # Fits nowhere.
    return make_pod(name, cpu="64")


def _filters(order: str) -> KubeSchedulerConfiguration:
    """The default profile, or with its Filter plugins in reverse order (plugins that read pods
    run before those that read the Node alone), or without NodeResourcesFit's Filter (every
    node-local Filter plugin then reads less of the pod than its shape)."""
    if order == "default":
        return default_config()
    frameworks = build_frameworks(default_config(), in_tree_registry(), Snapshot())
    names = [n for n, _ in next(iter(frameworks.values())).plugins_by_point()["filter"]]
    names = (
        list(reversed(names))
        if order == "reversed"
        else [n for n in names if n != "NodeResourcesFit"]
    )
    return load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {
                        "filter": {
                            "disabled": [{"name": "*"}],
                            "enabled": [{"name": n} for n in names],
                        }
                    },
                }
            ],
        }
    )


class _Side:
    """One snapshot and a profile over it."""

    def __init__(self, cached: bool, config: KubeSchedulerConfiguration) -> None:
        self.snapshot = Snapshot()
        frameworks = build_frameworks(
            config, in_tree_registry(), self.snapshot, rng=random.Random(7)
        )
        self.fw: Framework = next(iter(frameworks.values()))
        if not cached:
            self.fw._may_use_cache = lambda num_nodes: False  # type: ignore[method-assign]

    def schedule(self, pod: Pod) -> ScheduleResult | str:
        state = CycleState()
        state.pod_info = PodInfo.of(pod)
        try:
            return self.fw.schedule_pod(state, pod)
        except FitError as e:
            return str(e) + repr(sorted(e.diagnosis.node_statuses(self.snapshot).items()))


def _same(a: ScheduleResult | str, b: ScheduleResult | str) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert a.feasible_slots.tolist() == b.feasible_slots.tolist()
    assert a.plugin_scores.keys() == b.plugin_scores.keys()
    for name, scores in a.plugin_scores.items():
        assert scores.tolist() == b.plugin_scores[name].tolist(), name
    assert a.totals.tolist() == b.totals.tolist()
    assert a.suggested_host == b.suggested_host
    assert a.evaluated_nodes == b.evaluated_nodes
    statuses = {(int(s), repr(g.status)) for g in a.diagnosis.groups for s in g.slots.tolist()}
    assert statuses == {
        (int(s), repr(g.status)) for g in b.diagnosis.groups for s in g.slots.tolist()
    }
    assert a.diagnosis.unschedulable_plugins == b.diagnosis.unschedulable_plugins


def _own_requests(pod: Pod, rnd: random.Random) -> Pod:
    """``pod`` asking for a CPU of its own: a shape no other pod has, alike in all but that
    (a pod asking for no CPU, or for more than any node has, is left as it is)."""
    requests = pod.spec.containers[0].resources.requests
    if requests.get("cpu") not in (None, "64"):
        requests["cpu"] = f"{rnd.randrange(1, 1600)}m"
    return pod


@pytest.mark.parametrize("requests", ["shared", "own"])
@pytest.mark.parametrize("order", ["default", "reversed", "no-fit"])
@pytest.mark.parametrize("seed", range(1, 9))
def test_cached_decisions_equal_uncached_ones(seed: int, order: str, requests: str) -> None:
    """With ``own`` requests no whole shape repeats: only the first Filter plugins' verdicts,
    kept by what those read of the pod, are shared."""
    _decide_alike(random.Random(seed), order, requests=requests, nominations=None)


@pytest.mark.parametrize("order", ["default", "no-fit"])
@pytest.mark.parametrize("seed", range(1, 9))
def test_cached_decisions_equal_uncached_ones_while_pods_are_nominated(
    seed: int, order: str
) -> None:
    """Pods nominated to nodes (of a priority some pods have and some exceed) come and go: the
    cached side counts them in on their nodes over kept verdicts, the other runs both passes
    on every node with nothing kept."""
    _decide_alike(random.Random(seed), order, requests="shared", nominations=_Nominations())


def _decide_alike(
    rnd: random.Random,
    order: str,
    *,
    requests: str,
    nominations: _Nominations | None,
) -> None:
    """500 steps of node and pod changes, each pod scheduled on both sides: the same outcome."""
    config = _filters(order)
    sides = (_Side(cached=True, config=config), _Side(cached=False, config=config))
    if nominations is not None:
        sides[1].fw.node_verdict_key = lambda state, pod: None  # type: ignore[method-assign]
        for side in sides:
            side.fw.set_pod_nominator(nominations)
    nodes = {f"n{i}": _node(i, rnd) for i in range(40)}
    for side in sides:
        for n in nodes.values():
            side.snapshot.set_node(n)
    placed: list[tuple[PodInfo, str]] = []
    nominated: list[PodInfo] = []
    next_node = len(nodes)
    scheduled = failed = 0

    def both(fn: Any) -> None:
        for side in sides:
            fn(side)

    for step in range(500):
        roll = rnd.random()
        if roll < 0.06:
            # A node's taints, labels or cordon change (a Node update).
            name = rnd.choice(sorted(nodes))
            nodes[name] = _node(int(name[1:]) + 1000 * step, rnd)
            nodes[name].metadata.name = name
            both(lambda s, n=nodes[name]: s.snapshot.set_node(n))
        elif roll < 0.08 and len(nodes) > 10:
            name = rnd.choice(sorted(nodes))
            del nodes[name]
            both(lambda s, n=name: s.snapshot.remove_node(n))
        elif roll < 0.10:
            name = f"n{next_node}"
            next_node += 1
            nodes[name] = _node(next_node, rnd)
            nodes[name].metadata.name = name
            both(lambda s, n=nodes[name]: s.snapshot.set_node(n))
        elif roll < 0.16 and placed:
            info, _ = placed.pop(rnd.randrange(len(placed)))
            both(lambda s, i=info: s.snapshot.remove_pod(i.uid))
        elif roll < 0.24 and nominations is not None:
            if nominated and rnd.random() < 0.4:
                nominations.drop(nominated.pop(rnd.randrange(len(nominated))).uid)
            else:
                pod = _pod(f"nom{step}", rnd.randrange(12))
                pod.spec.priority = rnd.choice([0, 10])
                nominated.append(PodInfo.of(pod))
                nominations.nominate(nominated[-1], rnd.choice(sorted(nodes)))
        else:
            pod = _pod(f"p{step}", rnd.randrange(12))
            if requests == "own":
                pod = _own_requests(pod, rnd)
            if nominations is not None:
                pod.spec.priority = rnd.choice([0, 5])
            a, b = (side.schedule(pod) for side in sides)
            _same(a, b)
            if isinstance(a, ScheduleResult):
                info = PodInfo.of(pod)
                both(lambda s, i=info, h=a.suggested_host: s.snapshot.add_pod(i, h))
                placed.append((info, a.suggested_host))
                scheduled += 1
            else:
                failed += 1
    # The run exercised both outcomes (without NodeResourcesFit's Filter nearly every pod fits).
    assert scheduled > 100
    assert failed > 10 or order == "no-fit"


def _count_calls(side: _Side, method: str, *plugins: str) -> dict[str, int]:
    """How often each of ``plugins`` is called by ``method`` from now on."""
    calls = dict.fromkeys(plugins, 0)
    for name in plugins:
        plugin = side.fw.plugin(name)
        assert plugin is not None
        original = getattr(plugin, method)

        def counting(*args: Any, name: str = name, original: Any = original) -> Any:
            calls[name] += 1
            return original(*args)

        setattr(plugin, method, counting)
    return calls


def test_repeated_shape_is_served_from_the_cache() -> None:
    side = _Side(cached=True, config=default_config())
    for i in range(20):
        side.snapshot.set_node(make_node(f"n{i}"))
    calls = _count_calls(side, "filter_nodes", "NodeResourcesFit")
    for i in range(5):
        r = side.schedule(make_pod(f"p{i}", cpu="100m"))
        assert isinstance(r, ScheduleResult)
        side.snapshot.add_pod(PodInfo.of(make_pod(f"p{i}", cpu="100m")), r.suggested_host)
    # Vectorized over every node twice: the first pod of a shape the ordinary way, the second
    # into the cache; after that only the changed node, one at a time.
    assert calls == {"NodeResourcesFit": 2}
    assert np.all(r.totals >= 0)


def test_first_filter_plugins_are_kept_by_what_they_read() -> None:
    """Pods alike but for their requests: the plugins before NodeResourcesFit read no requests,
    so their verdicts are kept by what they read (tolerations, node name) and asked again only
    about changed nodes; NodeResourcesFit, keyed by the whole shape, runs on every node."""
    side = _Side(cached=True, config=default_config())
    for i in range(20):
        taints = [{"key": "gpu", "effect": "NoSchedule"}] if i % 4 == 0 else []
        side.snapshot.set_node(make_node(f"n{i}", taints=taints))
    calls = _count_calls(side, "filter_nodes", "TaintToleration", "NodeResourcesFit")
    for i in range(6):
        pod = make_pod(f"p{i}", cpu=f"{100 + i}m")
        r = side.schedule(pod)
        assert isinstance(r, ScheduleResult)
        # The tainted nodes stay out, by TaintToleration's verdicts kept.
        assert len(r.feasible_slots) == 15
        side.snapshot.add_pod(PodInfo.of(pod), r.suggested_host)
    # TaintToleration vectorized twice (the first pod the ordinary way, the second into the
    # cache), then on the one changed node; NodeResourcesFit on every node for each pod.
    assert calls == {"TaintToleration": 2, "NodeResourcesFit": 6}


def test_node_local_plugins_before_another_are_served_from_the_cache() -> None:
    """A pod with required anti-affinity: the node-local Filter plugins' verdicts come from the
    cache, InterPodAffinity (which counts pods elsewhere) runs every cycle."""
    side = _Side(cached=True, config=default_config())
    for i in range(20):
        side.snapshot.set_node(make_node(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}"}))
    calls = _count_calls(side, "filter_nodes", "NodeResourcesFit", "InterPodAffinity")
    hosts = set()
    for i in range(5):
        pod = _pod(f"p{i}", 6)
        r = side.schedule(pod)
        assert isinstance(r, ScheduleResult)
        side.snapshot.add_pod(PodInfo.of(pod), r.suggested_host)
        hosts.add(r.suggested_host)
    # One pod per node (the anti-affinity holds); the node-local plugins vectorized twice as
    # above, InterPodAffinity once per pod.
    assert len(hosts) == 5
    assert calls == {"NodeResourcesFit": 2, "InterPodAffinity": 5}


def test_node_local_scores_beside_another_are_served_from_the_cache() -> None:
    """A pod with preferred pod affinity: the node-local Score plugins' scores come from the
    cache, InterPodAffinity's are asked every cycle and added."""
    side = _Side(cached=True, config=default_config())
    for i in range(20):
        side.snapshot.set_node(make_node(f"n{i}", labels={"topology.kubernetes.io/zone": "z1"}))
    calls = _count_calls(side, "score_nodes", "NodeResourcesFit", "InterPodAffinity")
    side.snapshot.add_pod(PodInfo.of(make_pod("db", labels={"app": "db"})), "n3")
    for i in range(5):
        pod = _pod(f"p{i}", 7)
        r = side.schedule(pod)
        assert isinstance(r, ScheduleResult)
        assert set(r.plugin_scores) >= {"NodeResourcesFit", "InterPodAffinity"}
        side.snapshot.add_pod(PodInfo.of(pod), r.suggested_host)
    # NodeResourcesFit over every node twice (the second pod of a shape fills the cache), then
    # on changed nodes one at a time; InterPodAffinity over every node each cycle.
    assert calls == {"NodeResourcesFit": 2, "InterPodAffinity": 5}


# -- claims ----------------------------------------------------------------------------------------

CSI_DRIVER = "csi.example.com"
EBS_DRIVER = "ebs.csi.aws.com"


class _Nominations:
    """A PodNominator both sides share."""

    def __init__(self) -> None:
        self._on: dict[str, dict[str, PodInfo]] = {}
        self._stamps: dict[str, int] = {}
        self._changes = 0

    def nominate(self, info: PodInfo, node: str) -> None:
        self.drop(info.uid)
        self._on.setdefault(node, {})[info.uid] = info
        self._changed(node)

    def drop(self, uid: str) -> None:
        for node, pods in list(self._on.items()):
            if pods.pop(uid, None) is not None:
                if not pods:
                    del self._on[node]
                self._changed(node)

    def _changed(self, node: str) -> None:
        self._changes += 1
        self._stamps[node] = self._changes

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self._on.get(node_name, {}).values())

    def nominated_nodes(self) -> list[str]:
        return list(self._on)

    def nominations_stamp(self, node_name: str) -> int:
        return self._stamps.get(node_name, 0)


def _csi_node(name: str, rnd: random.Random) -> CSINode:
    annotations = {}
    if rnd.random() < 0.5:
        annotations["storage.alpha.kubernetes.io/migrated-plugins"] = "kubernetes.io/aws-ebs"
    drivers = [
        {"name": d, "nodeID": name, "allocatable": {"count": rnd.randint(1, 3)}}
        for d in (CSI_DRIVER, EBS_DRIVER)
    ]
    return msgspec.convert(
        {"metadata": {"name": name, "annotations": annotations}, "spec": {"drivers": drivers}},
        CSINode,
    )


def _bound_claim(name: str, source: dict[str, Any], zone: str | None) -> list[Any]:
    """A claim bound to a volume of its own: ``source`` is the volume's, ``zone`` its reach."""
    spec: dict[str, Any] = {**source, "claimRef": {"namespace": "default", "name": name}}
    if zone is not None:
        term = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}
    volume = msgspec.convert(
        {"metadata": {"name": f"pv-{name}"}, "spec": spec, "status": {"phase": "Bound"}},
        PersistentVolume,
    )
    claim = msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {ANN_BIND_COMPLETED: "yes"},
            },
            "spec": {"volumeName": f"pv-{name}"},
            "status": {"phase": "Bound"},
        },
        PersistentVolumeClaim,
    )
    return [volume, claim]


@pytest.mark.parametrize("seed", range(1, 11))
def test_pods_alike_but_for_their_claims_decide_as_uncached(seed: int) -> None:
    """Each pod brings a volume of its own (CSI or in-tree, in reach of a zone or of all),
    shares one with pods placed or nominated, or names one of their volumes inline; nodes
    limit how many volumes attach, some count in-tree ones. Verdicts kept for pods alike but
    for their claims, with and without nominated pods counted, decide as none kept."""
    rnd = random.Random(seed)
    nominations = _Nominations()
    cached, plain = _Side(True, default_config()), _Side(False, default_config())
    plain.fw.node_verdict_key = lambda state, pod: None  # type: ignore[method-assign]
    sides = (cached, plain)
    for side in sides:
        side.fw.set_pod_nominator(nominations)

    def put(*objects: Any) -> None:
        for side in sides:
            for obj in objects:
                side.snapshot.objects.set(obj)

    for i in range(12):
        zone = ZONES[i % 3]
        labels = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": zone}
        for side in sides:
            side.snapshot.set_node(make_node(f"n{i}", cpu="8", labels=labels))
        put(_csi_node(f"n{i}", rnd))
    # Every claim exists from the start (creating one changes the plugins' epochs): each pod
    # takes fresh ones from these, or one a pod placed or nominated took.
    fresh: list[str] = []
    for k in range(600):
        # Half of them by the driver the in-tree volumes migrated to.
        source = {"csi": {"driver": (CSI_DRIVER, EBS_DRIVER)[k % 2], "volumeHandle": f"h-{k}"}}
        put(*_bound_claim(f"csi-{k}", source, rnd.choice([None, *ZONES])))
        fresh.append(f"csi-{k}")
    fresh_ebs = []
    for k in range(100):
        put(*_bound_claim(f"ebs-{k}", {"awsElasticBlockStore": {"volumeID": f"vol-{k}"}}, None))
        fresh_ebs.append(f"ebs-{k}")
    taken: list[str] = []
    claims_of: dict[str, list[str]] = {}
    placed: list[PodInfo] = []
    nominated: list[PodInfo] = []
    outcomes: set[str] = set()
    for step in range(600):
        roll = rnd.random()
        if roll < 0.08 and placed:
            info = placed.pop(rnd.randrange(len(placed)))
            for side in sides:
                side.snapshot.remove_pod(info.uid)
            continue
        if roll < 0.12 and nominated:
            nominations.drop(nominated.pop(rnd.randrange(len(nominated))).uid)
            continue
        if roll < 0.13:
            put(_csi_node(f"n{rnd.randrange(12)}", rnd))
            continue
        kind = rnd.randrange(6)
        names: list[str] = []
        if kind in (0, 4) or (kind == 2 and not taken):
            names = [fresh.pop() for _ in range(1 + (kind == 4))]
        elif kind == 1:
            names = [fresh_ebs.pop()]
        elif kind == 2:
            # Often one a nominated pod brings: counted on its node in the first pass only.
            pool = taken[-8:]
            if nominated and rnd.random() < 0.6:
                pool = claims_of[rnd.choice(nominated).uid] or pool
            names = [rnd.choice(pool)]
        taken += names
        volumes: list[dict[str, Any]] = [
            {"name": f"v{k}", "persistentVolumeClaim": {"claimName": c}}
            for k, c in enumerate(names)
        ]
        if kind == 3:
            ebs = {"volumeID": f"vol-{rnd.randrange(100)}"}
            volumes.append({"name": "v0", "awsElasticBlockStore": ebs})
        pod = make_pod(
            f"p{step}",
            cpu=rnd.choice(["100m", "1"]),
            priority=rnd.choice([0, 10]),
            spec={"volumes": volumes},
        )
        a, b = (side.schedule(pod) for side in sides)
        _same(a, b)
        if not isinstance(a, ScheduleResult):
            outcomes.add("failed, max volume count" if "max volume" in a else "failed")
            continue
        outcomes.add("placed, pods nominated" if nominated else "placed, none nominated")
        info = PodInfo.of(pod)
        claims_of[info.uid] = names
        if rnd.random() < 0.3:
            nominations.nominate(info, a.suggested_host)
            nominated.append(info)
        else:
            for side in sides:
                side.snapshot.add_pod(info, a.suggested_host)
            placed.append(info)
    assert outcomes >= {
        "failed, max volume count",
        "placed, pods nominated",
        "placed, none nominated",
    }


def test_scores_over_the_nodes_left_by_nominated_pods_are_normalized_over_those_alone() -> None:
    """A node failing only with a nominated pod counted leaves the kept feasible nodes; the
    scores of a plugin that normalizes (NodeAffinity here) are normalized over the nodes left,
    as the ordinary path computes them: n1's 30 of n0's 80 becomes the top score."""
    nominations = _Nominations()
    cached, plain = _Side(True, default_config()), _Side(False, default_config())
    plain.fw.node_verdict_key = lambda state, pod: None  # type: ignore[method-assign]
    labels = [{"disk": "ssd", "net": "fast"}, {"net": "fast"}, {}, {}]
    for side in (cached, plain):
        side.fw.set_pod_nominator(nominations)
        for i, extra in enumerate(labels):
            side.snapshot.set_node(
                make_node(f"n{i}", cpu="4", labels={"kubernetes.io/hostname": f"n{i}", **extra})
            )
    nominations.nominate(PodInfo.of(make_pod("big", cpu="3500m", priority=10)), "n0")

    def preferring(name: str) -> Pod:
        def term(weight: int, key: str, value: str) -> dict[str, Any]:
            expression = {"key": key, "operator": "In", "values": [value]}
            return {"weight": weight, "preference": {"matchExpressions": [expression]}}

        affinity = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                term(50, "disk", "ssd"),
                term(30, "net", "fast"),
            ]
        }
        return make_pod(name, cpu="1", spec={"affinity": {"nodeAffinity": affinity}})

    calls: dict[str, int] = {}
    for i in range(3):  # the shape's entry is made on its second sight
        if i == 2:
            calls = _count_calls(cached, "score_nodes", "NodeAffinity")
        a, b = cached.schedule(preferring(f"p{i}")), plain.schedule(preferring(f"p{i}"))
        _same(a, b)
        assert isinstance(a, ScheduleResult)
        assert a.suggested_host == "n1"
        assert a.plugin_scores["NodeAffinity"].max() == 200  # 100, weighted 2 by default
    assert calls == {"NodeAffinity": 0}  # the third from the kept raw scores
