package main

// Preemption as API work: when a pod of some priority does not fit on its node in turn, the
// binder makes the writes kube-scheduler's DefaultPreemption makes (per victim the
// DisruptionTarget condition, the deletion and a Preempted event; for the preemptor a
// FailedScheduling event and its nominatedNodeName), then binds it there. The victims are the
// node's pods of lower priority that must go for the pod's CPU and memory requests to fit: no
// node is compared with another, so nothing is decided; only the preemption workloads' pods
// have a priority.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// amounts are CPU in millicores and memory in bytes.
type amounts struct{ cpu, mem int64 }

func requests(pod *v1.Pod) amounts {
	var a amounts
	for _, c := range pod.Spec.Containers {
		a.cpu += c.Resources.Requests.Cpu().MilliValue()
		a.mem += c.Resources.Requests.Memory().Value()
	}
	return a
}

func priority(pod *v1.Pod) int32 {
	if pod.Spec.Priority == nil {
		return 0
	}
	return *pod.Spec.Priority
}

// occupancy is what is bound where, from the watch of bound pods and the binder's own
// bindings (a pod it bound counts before the watch brings it).
type occupancy struct {
	mu          sync.Mutex
	allocatable map[string]amounts
	pods        map[string]map[types.UID]*v1.Pod
	evicted     map[types.UID]bool
}

func newOccupancy(nodes []v1.Node) *occupancy {
	o := &occupancy{
		allocatable: map[string]amounts{},
		pods:        map[string]map[types.UID]*v1.Pod{},
		evicted:     map[types.UID]bool{},
	}
	for _, n := range nodes {
		a := n.Status.Allocatable
		o.allocatable[n.Name] = amounts{a.Cpu().MilliValue(), a.Memory().Value()}
		o.pods[n.Name] = map[types.UID]*v1.Pod{}
	}
	return o
}

func (o *occupancy) bound(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// A terminating pod counts until it is gone, as in kube-scheduler's cache.
	if on := o.pods[pod.Spec.NodeName]; on != nil && !o.evicted[pod.UID] {
		on[pod.UID] = pod
	}
}

func (o *occupancy) gone(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pods[pod.Spec.NodeName], pod.UID)
	delete(o.evicted, pod.UID)
}

// unplace takes back what place counted of pod when its binding failed: the watch of bound
// pods never brings it.
func (o *occupancy) unplace(pod *v1.Pod, node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pods[node], pod.UID)
}

// spared counts again a victim whose eviction failed: it is still there.
func (o *occupancy) spared(victim *v1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.evicted, victim.UID)
	if on := o.pods[victim.Spec.NodeName]; on != nil {
		on[victim.UID] = victim
	}
}

// place counts pod on node and says which pods there to evict first for it to fit (none when it
// fits, requests no CPU or memory, has no priority or may not preempt, or the pods of lower
// priority are not enough).
func (o *occupancy) place(pod *v1.Pod, node string) (victims []*v1.Pod, short v1.ResourceName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	on := o.pods[node]
	if on == nil {
		return nil, ""
	}
	need := requests(pod)
	mayPreempt := pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != v1.PreemptNever
	if p := priority(pod); p > 0 && mayPreempt && (need.cpu > 0 || need.mem > 0) {
		// As DefaultPreemption's selectVictimsOnNode, for CPU and memory alone: every pod of
		// lower priority out, then each put back, the most important first, if the pod still fits.
		free := o.allocatable[node]
		var lower []*v1.Pod
		var taken amounts // by the pods of lower priority
		for _, other := range on {
			r := requests(other)
			if priority(other) < p {
				lower = append(lower, other)
				taken.cpu += r.cpu
				taken.mem += r.mem
			} else {
				free.cpu -= r.cpu
				free.mem -= r.mem
			}
		}
		short = v1.ResourceCPU
		if need.cpu <= free.cpu-taken.cpu {
			short = v1.ResourceMemory
		}
		if need.cpu <= free.cpu && need.mem <= free.mem {
			sort.Slice(lower, func(i, j int) bool { return moreImportant(lower[i], lower[j]) })
			for _, v := range lower {
				r := requests(v)
				if need.cpu <= free.cpu-r.cpu && need.mem <= free.mem-r.mem {
					free.cpu -= r.cpu
					free.mem -= r.mem
				} else {
					victims = append(victims, v)
				}
			}
		}
		for _, v := range victims {
			delete(on, v.UID)
			o.evicted[v.UID] = true
		}
	}
	on[pod.UID] = pod
	return victims, short
}

// moreImportant is util.MoreImportantPod: higher priority, then started earlier (here: created;
// with no kubelet no pod has a start time). PodDisruptionBudgets are not consulted: which pods
// go may differ from kube-scheduler's choice, not how many writes they take.
func moreImportant(a, b *v1.Pod) bool {
	if pa, pb := priority(a), priority(b); pa != pb {
		return pa > pb
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// preempt writes what kube-scheduler writes when pod preempts victims on node.
func preempt(ctx context.Context, client kubernetes.Interface, recorder events.EventRecorder, occupied *occupancy, pod *v1.Pod, node string, victims []*v1.Pod, short v1.ResourceName, nodes int) {
	for _, victim := range victims {
		condition := v1.PodCondition{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			LastTransitionTime: metav1.Now(),
			Reason:             v1.PodReasonPreemptionByScheduler,
			Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority pod", pod.Spec.SchedulerName),
		}
		if err := patchStatus(ctx, client, victim, map[string]any{"conditions": []v1.PodCondition{condition}}); err != nil {
			klog.ErrorS(err, "Adding DisruptionTarget", "pod", klog.KObj(victim))
			occupied.spared(victim)
			continue
		}
		err := client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue // gone already: kube-scheduler writes no event then
		}
		if err != nil {
			klog.ErrorS(err, "Deleting a victim", "pod", klog.KObj(victim))
			occupied.spared(victim)
			continue
		}
		recorder.Eventf(victim, pod, v1.EventTypeNormal, "Preempted", "Preempting",
			"Preempted by pod %v on node %v", pod.UID, node)
	}
	// The rejection kube-scheduler's first attempt reports (preemption adds nothing when it
	// nominates), for the one node the binder looked at.
	message := fmt.Sprintf("0/%d nodes are available: 1 Insufficient %s.", nodes, short)
	recorder.Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", message)
	status := map[string]any{
		"nominatedNodeName": node,
		"conditions": []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, LastTransitionTime: metav1.Now(),
			Reason: v1.PodReasonUnschedulable, Message: message,
		}},
	}
	if err := patchStatus(ctx, client, pod, status); err != nil {
		klog.ErrorS(err, "Nominating", "pod", klog.KObj(pod), "node", node)
	}
}

// patchStatus sends status as a strategic merge patch of the pod's status, as
// kube-scheduler's util.PatchPodStatus does (conditions merge by type).
func patchStatus(ctx context.Context, client kubernetes.Interface, pod *v1.Pod, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}
