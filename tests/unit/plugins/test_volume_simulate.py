"""The volume plugins in ``kubesched simulate``: manifests' PVs, PVCs, StorageClasses and CSINodes
reach the plugins, bindings land in the simulated store, and provisioning completes there."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api import PersistentVolume, PersistentVolumeClaim
from kubesched.config import default_config
from kubesched.framework import Snapshot
from kubesched.kube import Conflict
from kubesched.plugins import default_registry
from kubesched.simulate import SimulationResult, load_text, simulate
from kubesched.simulate._storage import MemoryStorage, feed

MANIFESTS = """
kind: Node
metadata: {name: a, labels: {kubernetes.io/hostname: a}}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
kind: Node
metadata: {name: b, labels: {kubernetes.io/hostname: b}}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: dynamic}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: immediate}
provisioner: csi.example.com
volumeBindingMode: Immediate
---
kind: PersistentVolume
metadata: {name: local-b}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/disks/1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [b]}]
status: {phase: Available}
---
kind: PersistentVolumeClaim
metadata: {name: first, uid: first-uid}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {requests: {storage: 1Gi}}
---
kind: PersistentVolumeClaim
metadata: {name: second, uid: second-uid}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {requests: {storage: 1Gi}}
---
kind: PersistentVolumeClaim
metadata: {name: provisioned, uid: provisioned-uid}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: dynamic
  resources: {requests: {storage: 3Gi}}
---
kind: PersistentVolumeClaim
metadata: {name: waiting, uid: waiting-uid}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: immediate
  resources: {requests: {storage: 1Gi}}
"""


def pod(name: str, claim: str) -> str:
    return f"""
---
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - {{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: 100m}}}}}}
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]
"""


def run(text: str) -> SimulationResult:
    inputs = load_text(text)
    assert inputs.errors == [], [str(i) for i in inputs.errors]
    return asyncio.run(simulate(inputs, default_config(), default_registry(), seed=1))


def test_claims_bind_to_reachable_volumes_and_are_provisioned() -> None:
    result = run(
        MANIFESTS
        + pod("uses-local", "first")
        + pod("wants-the-same-pv", "second")
        + pod("provisioned", "provisioned")
        + pod("immediate", "waiting")
        + pod("missing", "nope")
    )
    by_name = {p.name: p for p in result.pods}
    # Only b reaches the local PV, although a has far more room.
    assert (by_name["uses-local"].reason, by_name["uses-local"].node) == ("Scheduled", "b")
    # The PV is taken now: no node has a volume for the second claim.
    assert by_name["wants-the-same-pv"].reason == "Unschedulable"
    assert by_name["wants-the-same-pv"].message.startswith(
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )
    # A class with a provisioner: provisioned on the chosen node (the roomier one).
    assert (by_name["provisioned"].reason, by_name["provisioned"].node) == ("Scheduled", "a")
    assert by_name["immediate"].message.startswith(
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    assert by_name["missing"].message.startswith(
        '0/2 nodes are available: persistentvolumeclaim "nope" not found.'
    )


def test_memory_storage_binds_and_provisions() -> None:
    inputs = load_text(MANIFESTS)
    snapshot = Snapshot()
    feed(snapshot, inputs.objects)
    storage = MemoryStorage(snapshot)
    claim = snapshot.objects.get(PersistentVolumeClaim, "provisioned", "default")
    assert claim is not None
    done = asyncio.run(
        storage.patch_persistent_volume_claim(
            "default",
            "provisioned",
            {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "a"}}},
        )
    )
    assert done.spec.volume_name == "pvc-provisioned-uid"
    assert done.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    pv = snapshot.objects.get(PersistentVolume, "pvc-provisioned-uid")
    assert pv is not None
    assert pv.spec.capacity == {"storage": "3Gi"}
    assert pv.spec.claim_ref is not None
    assert pv.spec.claim_ref.uid == "provisioned-uid"
    # A stale resourceVersion is a conflict, as on the API server.
    stale = {"metadata": {"resourceVersion": "old"}, "spec": {"claimRef": None}}
    with pytest.raises(Conflict, match="the object has been modified"):
        asyncio.run(storage.patch_persistent_volume("local-b", stale))


def test_pods_alike_but_for_their_ephemeral_volumes_go_where_each_volume_is() -> None:
    """Pods of one spec whose generic ephemeral claims are bound to local volumes on different
    nodes: each pod goes to its own volume's node, none to the node of another's."""
    nodes = "".join(
        f"""
---
kind: Node
metadata: {{name: {n}, labels: {{kubernetes.io/hostname: {n}}}}}
status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}}}"""
        for n in ("a", "b", "c", "d")
    )
    pods = ""
    for i, n in enumerate(("b", "c", "d", "a")):
        pods += f"""
---
kind: PersistentVolume
metadata: {{name: pv-{i}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {{path: /mnt/{i}}}
  claimRef: {{namespace: default, name: web-{i}-data}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{n}]}}]
status: {{phase: Bound}}
---
kind: PersistentVolumeClaim
metadata:
  name: web-{i}-data
  annotations: {{pv.kubernetes.io/bind-completed: "yes"}}
  ownerReferences: [{{apiVersion: v1, kind: Pod, name: web-{i}, uid: web-{i}, controller: true}}]
spec: {{accessModes: [ReadWriteOnce], storageClassName: local, volumeName: pv-{i}}}
status: {{phase: Bound}}
---
kind: Pod
metadata: {{name: web-{i}, uid: web-{i}}}
spec:
  containers:
  - {{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: 100m}}}}}}
  volumes:
  - name: data
    ephemeral:
      volumeClaimTemplate:
        spec: {{accessModes: [ReadWriteOnce], storageClassName: local}}
"""
    local = """
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer"""
    result = run(local + nodes + pods)
    assert {(p.name, p.reason, p.node) for p in result.pods} == {
        ("web-0", "Scheduled", "b"),
        ("web-1", "Scheduled", "c"),
        ("web-2", "Scheduled", "d"),
        ("web-3", "Scheduled", "a"),
    }
