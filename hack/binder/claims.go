package main

// The binder's share of DRA: a pod's ResourceClaims written as kube-scheduler's DynamicResources
// PreBind writes them (bindClaim), with no allocator behind them. A claim not yet allocated gets
// the next free device of its node's pool, one per request (the delete-protection finalizer
// first, then allocation and reservation in one status update); an allocated one only the pod in
// reservedFor, and the pod goes to its node. So per pod the API server does what it does for a
// scheduler on the DRA workloads (claim writes, binding, event), and still nothing is decided.

import (
	"context"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/util/retry"
)

// finalizer is what DynamicResources adds before allocating (resourceapi.Finalizer).
const finalizer = "resource.kubernetes.io/delete-protection"

// errNotReady: a claim of the pod is not there yet (the resourceclaim controller's work); the
// pod is offered again when its status names the claim.
var errNotReady = fmt.Errorf("claims not ready")

type device struct{ driver, pool, name string }

// claimWriter writes pods' claims; safe for concurrent use.
type claimWriter struct {
	client kubernetes.Interface
	claims resourcelisters.ResourceClaimLister

	mu sync.Mutex
	// free devices per node, in slice order; nodes with free devices in turn
	free  map[string][]device
	order []string
	next  int
	// per claim: a lock (sharers write in turn) and what was last written
	locks  map[string]*sync.Mutex
	latest map[string]*resourceapi.ResourceClaim
}

// newClaimWriter lists the ResourceSlices once (the binder does not follow later changes) and
// leaves out the devices the claims already allocate.
func newClaimWriter(ctx context.Context, client kubernetes.Interface, claims resourcelisters.ResourceClaimLister) (*claimWriter, error) {
	w := &claimWriter{
		client: client, claims: claims,
		free:  map[string][]device{},
		locks: map[string]*sync.Mutex{}, latest: map[string]*resourceapi.ResourceClaim{},
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing resource slices: %w", err)
	}
	all, err := claims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	taken := map[device]bool{}
	for _, c := range all {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			taken[device{r.Driver, r.Pool, r.Device}] = true
		}
	}
	for _, s := range slices.Items {
		if s.Spec.NodeName == nil {
			continue
		}
		node := *s.Spec.NodeName
		for _, d := range s.Spec.Devices {
			dev := device{s.Spec.Driver, s.Spec.Pool.Name, d.Name}
			if !taken[dev] {
				w.free[node] = append(w.free[node], dev)
			}
		}
	}
	for node := range w.free {
		w.order = append(w.order, node)
	}
	sort.Strings(w.order)
	return w, nil
}

// names are the pod's claims, or errNotReady while a template's claim is not named yet.
func claimNames(pod *v1.Pod) ([]string, error) {
	names := make([]string, 0, len(pod.Spec.ResourceClaims))
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			names = append(names, *pc.ResourceClaimName)
			continue
		}
		found := false
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == pc.Name && st.ResourceClaimName != nil {
				names = append(names, *st.ResourceClaimName)
				found = true
			}
		}
		if !found {
			return nil, errNotReady
		}
	}
	return names, nil
}

// missing is the first claim of the pod (namespace/name) not there yet, "" when all are; ok is
// false while a template's claim is not named in the pod's status.
func (w *claimWriter) missing(pod *v1.Pod) (key string, ok bool) {
	names, err := claimNames(pod)
	if err != nil {
		return "", false
	}
	for _, name := range names {
		if _, err := w.claims.ResourceClaims(pod.Namespace).Get(name); err != nil {
			return pod.Namespace + "/" + name, true
		}
	}
	return "", true
}

// write writes the pod's claims and says which node the pod goes to: the node of an allocated
// claim, else the next node in turn with a free device per request ("" for a claim without a
// node selector).
func (w *claimWriter) write(ctx context.Context, pod *v1.Pod) (string, error) {
	names, err := claimNames(pod)
	if err != nil {
		return "", err
	}
	node := ""
	for _, name := range names {
		key := pod.Namespace + "/" + name
		lock := w.lock(key)
		lock.Lock()
		n, err := w.writeOne(ctx, pod, name, key, node)
		lock.Unlock()
		if err != nil {
			return "", err
		}
		node = n
	}
	return node, nil
}

func (w *claimWriter) lock(key string) *sync.Mutex {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.locks[key]
	if !ok {
		l = &sync.Mutex{}
		w.locks[key] = l
	}
	return l
}

// writeOne reserves the claim for the pod (allocating it on node, or on the next node in turn
// when node is ""), retrying on conflict as bindClaim does; it returns the claim's node.
func (w *claimWriter) writeOne(ctx context.Context, pod *v1.Pod, name, key, node string) (string, error) {
	claims := w.client.ResourceV1().ResourceClaims(pod.Namespace)
	w.mu.Lock()
	claim := w.latest[key]
	w.mu.Unlock()
	if claim == nil {
		cached, err := w.claims.ResourceClaims(pod.Namespace).Get(name)
		if err != nil {
			return "", errNotReady
		}
		claim = cached
	}
	first := true
	var mine *resourceapi.AllocationResult
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := claims.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			claim = fresh
		}
		first = false
		claim = claim.DeepCopy()
		mine = nil
		if claim.Status.Allocation == nil {
			allocation, at, err := w.allocate(claim, node)
			if err != nil {
				return err
			}
			mine, node = allocation, at
			if !hasFinalizer(claim) {
				claim.Finalizers = append(claim.Finalizers, finalizer)
				updated, err := claims.Update(ctx, claim, metav1.UpdateOptions{})
				if err != nil {
					w.release(node, mine)
					return err
				}
				claim = updated
			}
			claim.Status.Allocation = allocation
		} else {
			node = allocatedNode(claim)
		}
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods", Name: pod.Name, UID: pod.UID,
		})
		updated, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			if mine != nil {
				w.release(node, mine)
			}
			return err
		}
		claim = updated
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", key, err)
	}
	w.mu.Lock()
	w.latest[key] = claim
	w.mu.Unlock()
	return node, nil
}

// allocate takes a free device per request on node (the next node in turn with enough of them
// when node is "").
func (w *claimWriter) allocate(claim *resourceapi.ResourceClaim, node string) (*resourceapi.AllocationResult, string, error) {
	requests := claim.Spec.Devices.Requests
	w.mu.Lock()
	defer w.mu.Unlock()
	if node == "" {
		for range w.order {
			candidate := w.order[w.next%len(w.order)]
			w.next++
			if len(w.free[candidate]) >= len(requests) {
				node = candidate
				break
			}
		}
	}
	if node == "" || len(w.free[node]) < len(requests) {
		return nil, "", fmt.Errorf("no node with %d free devices", len(requests))
	}
	results := make([]resourceapi.DeviceRequestAllocationResult, 0, len(requests))
	for i, r := range requests {
		d := w.free[node][i]
		results = append(results, resourceapi.DeviceRequestAllocationResult{
			Request: r.Name, Driver: d.driver, Pool: d.pool, Device: d.name,
		})
	}
	w.free[node] = w.free[node][len(requests):]
	return &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: results},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node},
			}},
		}}},
	}, node, nil
}

// release gives the devices of an allocation that was not written back to node.
func (w *claimWriter) release(node string, allocation *resourceapi.AllocationResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range allocation.Devices.Results {
		w.free[node] = append(w.free[node], device{r.Driver, r.Pool, r.Device})
	}
}

func hasFinalizer(claim *resourceapi.ResourceClaim) bool {
	for _, f := range claim.Finalizers {
		if f == finalizer {
			return true
		}
	}
	return false
}

// allocatedNode is the node an allocation's node selector names ("" for none).
func allocatedNode(claim *resourceapi.ResourceClaim) string {
	selector := claim.Status.Allocation.NodeSelector
	if selector == nil {
		return ""
	}
	for _, term := range selector.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == "metadata.name" && len(req.Values) == 1 {
				return req.Values[0]
			}
		}
	}
	return ""
}
