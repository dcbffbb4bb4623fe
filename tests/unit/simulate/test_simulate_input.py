"""Reading simulation input: every accepted form, what admission would add, and bad input."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from kubesched.api import LabelSelector
from kubesched.simulate import InputBuilder, InputError, load_inputs, load_text

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status:
  allocatable: {cpu: 4, memory: 8Gi, pods: 110}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: p1}
spec:
  containers:
  - name: c
    image: nginx
    resources:
      requests: {cpu: 500m, memory: 1Gi}
"""


def _yaml(*docs: str) -> str:
    return "\n---\n".join(textwrap.dedent(d).strip() for d in docs) + "\n"


def _messages(text: str) -> list[str]:
    return [str(i) for i in load_text(text, "in.yaml").issues]


# -- forms -------------------------------------------------------------------------------------


def test_multi_document_yaml_with_empty_documents() -> None:
    inputs = load_text(_yaml(NODE, "", POD, "# only a comment"))
    assert [n.metadata.name for n in inputs.nodes] == ["n1"]
    assert [p.key for p in inputs.pods] == ["default/p1"]
    assert inputs.issues == []


def test_yaml_numbers_are_quantities() -> None:
    inputs = load_text(_yaml(NODE))
    assert inputs.nodes[0].status.allocatable == {"cpu": "4", "memory": "8Gi", "pods": "110"}


def test_list_kinds_and_kubectl_get_output() -> None:
    # What `kubectl get nodes,pods -A -o yaml` prints: a List with server-filled fields.
    text = """
    apiVersion: v1
    kind: List
    metadata: {resourceVersion: ""}
    items:
    - apiVersion: v1
      kind: Node
      metadata:
        name: worker-1
        uid: 0b5e8a3e-1111-4d1f-9a6c-3c9b1f0f0a01
        resourceVersion: "4242"
        creationTimestamp: "2025-01-01T00:00:00Z"
        labels: {kubernetes.io/hostname: worker-1}
      spec: {podCIDR: 10.0.1.0/24, providerID: "kind://docker/x/worker-1"}
      status:
        capacity: {cpu: "8", memory: 16318164Ki, pods: "110"}
        allocatable: {cpu: "8", memory: 16215764Ki, pods: "110"}
        conditions:
        - type: Ready
          status: "True"
          lastHeartbeatTime: "2025-01-01T00:00:00Z"
        nodeInfo: {kubeletVersion: v1.34.0}
    - apiVersion: v1
      kind: Pod
      metadata:
        name: coredns-1
        namespace: kube-system
        uid: 6c1d2b9a-2222-4f4e-8d3a-5e7f9a1b2c3d
        creationTimestamp: 2025-01-01T00:00:01Z
        ownerReferences:
        - {apiVersion: apps/v1, kind: ReplicaSet, name: coredns, uid: x, controller: true}
      spec:
        nodeName: worker-1
        priority: 2000000000
        priorityClassName: system-cluster-critical
        preemptionPolicy: PreemptLowerPriority
        containers:
        - name: coredns
          image: registry.k8s.io/coredns/coredns:v1.11.3
          resources:
            limits: {memory: 170Mi}
            requests: {cpu: 100m, memory: 70Mi}
      status: {phase: Running, podIP: 10.0.1.2}
    - apiVersion: v1
      kind: Pod
      metadata: {name: job-done, namespace: default, uid: u-done}
      spec:
        nodeName: worker-1
        containers: [{name: c, image: busybox}]
      status: {phase: Succeeded}
    - apiVersion: v1
      kind: Pod
      metadata: {name: waiting, namespace: default, uid: u-wait}
      spec:
        priority: 0
        containers: [{name: c, image: busybox}]
      status:
        phase: Pending
        conditions:
        - {type: PodScheduled, status: "False", reason: Unschedulable, message: "0/1 nodes"}
    """
    inputs = load_text(textwrap.dedent(text))
    assert inputs.issues == []
    assert [n.metadata.name for n in inputs.nodes] == ["worker-1"]
    # The finished pod is ignored, as kube-scheduler's informer filter does.
    assert [p.key for p in inputs.pods] == ["kube-system/coredns-1", "default/waiting"]
    running, pending = inputs.running, inputs.pending
    assert [p.key for p in running] == ["kube-system/coredns-1"]
    assert running[0].metadata.creation_timestamp == "2025-01-01T00:00:01Z"  # not a datetime
    assert running[0].spec.priority == 2000000000
    assert [p.metadata.uid for p in pending] == ["u-wait"]


def test_typed_lists_and_json(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [
            {"metadata": {"name": "a"}, "kind": "Pod", "spec": {"containers": []}},
            {"metadata": {"name": "b"}, "kind": "Pod", "spec": {"containers": []}},
        ],
    }
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(doc))
    inputs = load_inputs([path])
    assert [p.metadata.name for p in inputs.pods] == ["a", "b"]


def test_directories_are_read_by_name_and_not_recursively(tmp_path: Path) -> None:
    (tmp_path / "b-pods.yaml").write_text(_yaml(POD))
    (tmp_path / "a-nodes.yml").write_text(_yaml(NODE))
    (tmp_path / "c.json").write_text(
        json.dumps({"kind": "Pod", "metadata": {"name": "p2"}, "spec": {}})
    )
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.yaml").write_text(_yaml(POD.replace("p1", "deep")))
    inputs = load_inputs([tmp_path])
    assert [n.metadata.name for n in inputs.nodes] == ["n1"]
    assert [p.metadata.name for p in inputs.pods] == ["p1", "p2"]
    assert inputs.issues == []


def test_empty_directory_is_a_warning(tmp_path: Path) -> None:
    inputs = load_inputs([tmp_path])
    assert [i.severity for i in inputs.issues] == ["warning"]


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(_yaml(NODE, POD)))
    inputs = load_inputs(["-"])
    assert len(inputs.nodes) == 1
    assert len(inputs.pods) == 1


def test_unreadable_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_inputs([tmp_path / "missing.yaml"])


# -- what the API server would add -----------------------------------------------------------


def test_pod_defaults() -> None:
    text = _yaml(
        """
        kind: Pod
        metadata: {generateName: web-}
        spec:
          containers:
          - name: c
            resources:
              limits: {cpu: 1, memory: 1Gi}
              requests: {memory: 512Mi}
        """
    )
    first = load_text(text).pods[0]
    again = load_text(text).pods[0]
    assert first.metadata.namespace == "default"
    assert first.metadata.name.startswith("web-")
    assert len(first.metadata.name) == len("web-") + 5
    assert first.metadata.uid
    # Same input, same name and UID: runs are reproducible.
    assert (first.metadata.name, first.metadata.uid) == (again.metadata.name, again.metadata.uid)
    # Requests default to limits where missing (API defaulting).
    assert first.spec.containers[0].resources.requests == {"memory": "512Mi", "cpu": "1"}
    assert first.spec.priority == 0
    assert first.spec.preemption_policy == "PreemptLowerPriority"


def test_node_allocatable_defaults_to_capacity() -> None:
    inputs = load_text(
        _yaml("""
        kind: Node
        metadata: {name: n}
        status: {capacity: {cpu: "2", pods: "10"}}
        """)
    )
    assert inputs.nodes[0].status.allocatable == {"cpu": "2", "pods": "10"}


PRIORITY_CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: everyday}
value: 10
globalDefault: true
"""


def _pod(name: str, extra: str = "") -> str:
    spec = textwrap.indent(textwrap.dedent(extra).strip(), "  ") if extra else ""
    return f"kind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: []\n{spec}\n"


def test_priority_from_class_and_global_default() -> None:
    # The pods come before the classes in the file: classes apply wherever they are.
    inputs = load_text(
        _yaml(
            _pod("named", "priorityClassName: high"),
            _pod("plain"),
            _pod("system", "priorityClassName: system-node-critical"),
            textwrap.dedent(PRIORITY_CLASSES),
        )
    )
    assert inputs.issues == []
    by_name = {p.metadata.name: p.spec for p in inputs.pods}
    assert (by_name["named"].priority, by_name["named"].preemption_policy) == (1000, "Never")
    assert (by_name["plain"].priority, by_name["plain"].priority_class_name) == (10, "everyday")
    assert by_name["system"].priority == 2000001000
    assert len(inputs.objects.priority_classes) == 2


def test_priority_refused_as_admission_refuses() -> None:
    messages = _messages(
        _yaml(
            textwrap.dedent(PRIORITY_CLASSES),
            _pod("unknown-class", "priorityClassName: nope"),
            _pod("own-priority", "priority: 5"),
            _pod("own-policy", "priorityClassName: high\npreemptionPolicy: PreemptLowerPriority"),
            _pod("agrees", "priorityClassName: high\npriority: 1000"),
        )
    )
    assert messages == [
        "error: in.yaml, document 3: Pod default/unknown-class: no PriorityClass with name nope "
        "was found",
        "error: in.yaml, document 4: Pod default/own-priority: the integer value of priority (5) "
        "must not be provided in pod spec; priority admission controller computed 10 from the "
        "given PriorityClass name",
        "error: in.yaml, document 5: Pod default/own-policy: the string value of PreemptionPolicy "
        "(PreemptLowerPriority) must not be provided in pod spec; priority admission controller "
        "computed Never from the given PriorityClass name",
    ]


def test_admitted_pods_keep_their_priority() -> None:
    # Running pods were admitted long ago; a pending pod read back with its priority set keeps
    # it even when its class is not in the input.
    inputs = load_text(
        _yaml(
            NODE,
            _pod("running", "nodeName: n1\npriority: 7\npriorityClassName: gone"),
            _pod("read-back", "priority: 3\npriorityClassName: gone"),
        )
    )
    assert inputs.issues == []
    assert [p.spec.priority for p in inputs.pods] == [7, 3]


def test_cluster_objects_are_kept() -> None:
    text = """
    apiVersion: v1
    kind: Namespace
    metadata: {name: team}
    ---
    apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv1}
    spec:
      capacity: {storage: 10Gi}
      accessModes: [ReadWriteOnce]
      storageClassName: fast
      nodeAffinity:
        required:
          nodeSelectorTerms:
          - matchExpressions: [{key: zone, operator: In, values: [a]}]
    ---
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: fast
      resources: {requests: {storage: 5Gi}}
    ---
    apiVersion: storage.k8s.io/v1
    kind: StorageClass
    metadata: {name: fast}
    provisioner: example.com/csi
    volumeBindingMode: WaitForFirstConsumer
    ---
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: team}
    spec:
      minAvailable: 50%
      selector: {matchLabels: {app: web}}
    """
    inputs = load_text(textwrap.dedent(text))
    assert inputs.issues == []
    objects = inputs.objects
    assert list(objects.namespaces) == ["team"]
    assert objects.persistent_volumes["pv1"].spec.capacity == {"storage": "10Gi"}
    assert objects.persistent_volume_claims["default/data"].spec.storage_class_name == "fast"
    assert objects.storage_classes["fast"].volume_binding_mode == "WaitForFirstConsumer"
    assert objects.pod_disruption_budgets["team/web"].spec.min_available == "50%"
    assert objects.counts()["PodDisruptionBudget"] == 1


def test_workloads_and_csinode_counts_are_read() -> None:
    text = """
    apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec: {clusterIP: None, selector: {app: web}}
    ---
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {name: api, namespace: team}
    spec:
      selector: {matchLabels: {app: api}}
    ---
    apiVersion: storage.k8s.io/v1
    kind: CSINode
    metadata: {name: n1}
    spec:
      drivers: [{name: csi.example.com, nodeID: n1, allocatable: {count: 2}}]
    ---
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {name: data}
    spec: {resources: {requests: {storage: 1Gi}}}
    """
    inputs = load_text(textwrap.dedent(text))
    assert inputs.issues == []
    objects = inputs.objects
    assert objects.workloads["Service/default/web"].spec.selector == {"app": "web"}
    replica_set = objects.workloads["ReplicaSet/team/api"]
    assert isinstance(replica_set.spec.selector, LabelSelector)
    assert replica_set.spec.selector.match_labels == {"app": "api"}
    assert objects.counts()["Service"] == objects.counts()["ReplicaSet"] == 1
    # A CSINode's count is an integer, not a quantity; every object gets a UID, as the API
    # server gives one.
    assert objects.csi_nodes["n1"].spec.drivers[0].allocatable is not None
    assert objects.csi_nodes["n1"].spec.drivers[0].allocatable.count == 2
    assert objects.persistent_volume_claims["default/data"].metadata.uid


# -- bad input -------------------------------------------------------------------------------


def test_unknown_kinds_are_skipped_with_a_warning() -> None:
    messages = _messages(_yaml(NODE, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}"))
    assert messages == ["warning: in.yaml, document 2: kind Deployment is not simulated; skipped"]


def test_wrong_api_group_is_skipped_with_a_warning() -> None:
    messages = _messages("apiVersion: example.com/v1\nkind: StorageClass\nmetadata: {name: s}\n")
    assert messages == [
        "warning: in.yaml, document 1: StorageClass of apiVersion 'example.com/v1' is not read; "
        "skipped"
    ]


def test_invalid_objects_are_errors_naming_file_and_document() -> None:
    text = _yaml(
        NODE,
        "kind: Pod\nmetadata: {name: bad-cpu}\nspec:\n  containers:\n"
        "  - name: c\n    resources: {requests: {cpu: 1x}}",
        "kind: Pod\nmetadata: {namespace: x}\nspec: {}",
        "kind: Node\nmetadata: {}\n",
        "kind: Node\nmetadata: {name: n2}\nstatus: {allocatable: {memory: lots}}",
        "kind: Pod\nmetadata: {name: typed}\nspec: {containers: 3}",
        "- just\n- a list",
        "metadata: {name: no-kind}",
        "kind: PriorityClass\napiVersion: scheduling.k8s.io/v1\nmetadata: {}\nvalue: 1",
        POD,
    )
    inputs = load_text(text, "in.yaml")
    assert [p.metadata.name for p in inputs.pods] == ["p1"]
    assert [n.metadata.name for n in inputs.nodes] == ["n1"]
    errors = [str(i) for i in inputs.errors]
    assert errors[0].startswith(
        "error: in.yaml, document 2: Pod default/bad-cpu: "
        "spec.containers[0].resources.requests[cpu]: quantities must match"
    )
    assert errors[1:4] == [
        "error: in.yaml, document 3: Pod: metadata.name is required",
        "error: in.yaml, document 4: Node: metadata.name is required",
        "error: in.yaml, document 5: Node n2: status.allocatable: quantities must match the "
        "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': 'lots'",
    ]
    assert errors[4] == (
        "error: in.yaml, document 6: Pod typed: Expected `array`, got `int` - at "
        "`$.spec.containers`"
    )
    assert errors[5:] == [
        "error: in.yaml, document 7: not a Kubernetes object but a list",
        "error: in.yaml, document 8: kind is missing",
        "error: in.yaml, document 9: PriorityClass: metadata.name is required",
    ]


def test_list_items_are_located() -> None:
    text = "kind: List\nitems:\n- kind: Pod\n  metadata: {name: ok}\n- kind: Pod\n  metadata: {}\n"
    assert _messages(text) == ["error: in.yaml, document 1, item 2: Pod: metadata.name is required"]


def test_invalid_yaml_keeps_the_documents_before() -> None:
    inputs = load_text(_yaml(NODE, "kind: Pod\nmetadata: {name: [unclosed\n", POD), "in.yaml")
    assert [n.metadata.name for n in inputs.nodes] == ["n1"]
    assert inputs.pods == []
    (issue,) = inputs.issues
    assert issue.severity == "error"
    assert issue.document == 2
    assert "invalid YAML (line" in issue.message


def test_duplicates_are_errors() -> None:
    messages = _messages(_yaml(NODE, NODE, POD, POD))
    assert messages == [
        "error: in.yaml, document 2: Node n1 already defined (in.yaml, document 1); skipped",
        "error: in.yaml, document 4: Pod default/p1 already defined (in.yaml, document 3); skipped",
    ]


def test_pod_on_a_node_not_in_the_input_is_a_warning() -> None:
    messages = _messages(_yaml(_pod("lost", "nodeName: elsewhere")))
    assert messages == [
        "warning: in.yaml, document 1: Pod default/lost runs on node elsewhere, which is not in "
        "the input: it counts there, but the node is no candidate"
    ]


def test_builder_combines_sources(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(_yaml(POD))
    builder = InputBuilder()
    builder.add_text(_yaml(NODE), "cluster")
    builder.add_paths([path])
    inputs = builder.finish()
    assert [n.metadata.name for n in inputs.nodes] == ["n1"]
    assert [p.key for p in inputs.pods] == ["default/p1"]
    assert builder.finish() is inputs
