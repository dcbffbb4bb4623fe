// Command binder is the API server's ceiling in `kubesched bench e2e`: it makes no decision at
// all. It lists the nodes once, watches the pending pods and binds each to the next node in
// turn (a pod pinned to a node by name, as a DaemonSet's, to that node; a pod of some priority
// that does not fit there first evicts pods of lower priority, preempt.go), -in-flight
// bindings at a time, then records the Scheduled event kube-scheduler writes
// (events.k8s.io/v1, through client-go's event broadcaster, from its own client as
// kube-scheduler's). A pod's ResourceClaims are written first as kube-scheduler writes them
// (claims.go). Per pod the API server does what it does for a scheduler, a binding and an event
// (and the claims), and nothing is decided: a scheduler on the same control plane should not
// bind faster.
//
// Pods with scheduling gates are left alone (the API server refuses to bind them), and so are
// pods for another scheduler. SIGTERM or SIGINT stops it; -version prints the client-go version
// stamped in at build time.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// version is the k8s.io/client-go version (and a digest of this module), set with
// -ldflags -X main.version.
var version = "unknown"

const (
	schedulerName = v1.DefaultSchedulerName
	// kube-scheduler's event: schedule_one.go's finishBinding.
	reasonScheduled = "Scheduled"
	actionBinding   = "Binding"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server (required)")
	inFlight := flag.Int("in-flight", 64, "bindings in flight at once")
	qps := flag.Float64("qps", 5000, "client QPS, as the schedulers' clientConnection")
	burst := flag.Int("burst", 5000, "client burst, as the schedulers' clientConnection")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("binder k8s.io/client-go %s\n", version)
		return
	}
	if *kubeconfig == "" || *inFlight < 1 {
		fmt.Fprintln(os.Stderr, "binder: --kubeconfig is required and --in-flight must be at least 1")
		flag.Usage()
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.ErrorS(err, "Reading --kubeconfig", "path", *kubeconfig)
		os.Exit(1)
	}
	config.QPS, config.Burst = float32(*qps), *burst
	// kube-scheduler's client connection: protobuf, uncompressed (its createKubeConfig and
	// the clientConnection defaults), so the API server encodes and decodes as much for either.
	config.ContentType = runtime.ContentTypeProtobuf
	config.DisableCompression = true
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, config, *inFlight); err != nil {
		klog.ErrorS(err, "Binder failed")
		os.Exit(1)
	}
}

// run binds pending pods until ctx is done.
func run(ctx context.Context, config *rest.Config, inFlight int) error {
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(config, "binder"))
	if err != nil {
		return err
	}
	// Events go through a client (and rate limiter) of their own, as kube-scheduler's do.
	eventClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	nodeList, err := listNodes(ctx, client)
	if err != nil {
		return err
	}
	nodes := make([]string, 0, len(nodeList))
	for _, node := range nodeList {
		nodes = append(nodes, node.Name)
	}
	sort.Strings(nodes)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventClient.EventsV1()})
	defer broadcaster.Shutdown()
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, schedulerName)

	// The claims first: a pod with claims is bound once they are there.
	claimFactory := informers.NewSharedInformerFactory(client, 0)
	claims := claimFactory.Resource().V1().ResourceClaims()
	claimInformer := claims.Informer()
	claimFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), claimInformer.HasSynced) {
		return fmt.Errorf("the resource claims did not sync")
	}
	writer, err := newClaimWriter(ctx, client, claims.Lister())
	if err != nil {
		return err
	}

	// What is bound where, for preemption (preempt.go): known before the first binding.
	occupied := newOccupancy(nodeList)
	boundFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(options *metav1.ListOptions) {
			// As kube-scheduler's informer: finished pods take nothing.
			options.FieldSelector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
		}))
	boundPods := boundFactory.Core().V1().Pods().Informer()
	if _, err := boundPods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    occupied.bound,
		UpdateFunc: func(_, obj any) { occupied.bound(obj) },
		DeleteFunc: occupied.gone,
	}); err != nil {
		return err
	}
	boundFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), boundPods.HasSynced) {
		return fmt.Errorf("the bound pods did not sync")
	}

	queue := workqueue.NewTyped[*v1.Pod]()
	pending := newPending(queue, writer)
	if _, err := claimInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: pending.claimAdded}); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(options *metav1.ListOptions) {
			options.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pending.offer,
		UpdateFunc: func(_, obj any) { pending.offer(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())

	next := roundRobin(nodes)
	var workers sync.WaitGroup
	workers.Add(inFlight)
	for range inFlight {
		go func() {
			defer workers.Done()
			for {
				pod, shutdown := queue.Get()
				if shutdown {
					return
				}
				node := ""
				if len(pod.Spec.ResourceClaims) > 0 {
					n, err := writer.write(ctx, pod)
					if err != nil {
						klog.ErrorS(err, "Writing claims", "pod", klog.KObj(pod))
						queue.Done(pod)
						continue
					}
					node = n
				}
				if node == "" {
					node = pinned(pod)
				}
				if node == "" {
					node = next()
				}
				if victims, short := occupied.place(pod, node); len(victims) > 0 {
					preempt(ctx, client, recorder, occupied, pod, node, victims, short, len(nodes))
				}
				if !bindOne(ctx, client, recorder, pod, node) {
					occupied.unplace(pod, node)
				}
				queue.Done(pod)
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	workers.Wait()
	factory.Shutdown()
	return nil
}

// listNodes lists the nodes once: the binder does not follow later changes.
func listNodes(ctx context.Context, client kubernetes.Interface) ([]v1.Node, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no nodes to bind to")
	}
	return list.Items, nil
}

// roundRobin returns the next node in turn, safe for concurrent use.
func roundRobin(nodes []string) func() string {
	var n atomic.Uint64
	return func() string {
		return nodes[(n.Add(1)-1)%uint64(len(nodes))]
	}
}

// pending is whether the binder binds pod: not bound, not being deleted, not gated, and for
// the default scheduler.
func pending(pod *v1.Pod) bool {
	return pod.Spec.NodeName == "" &&
		pod.DeletionTimestamp == nil &&
		len(pod.Spec.SchedulingGates) == 0 &&
		pod.Spec.SchedulerName == schedulerName
}

// pendingPods queues each pending pod once: the watch may deliver a pod again (an update, a
// relist) before its binding shows, and a second binding would only be refused. A pod with
// claims waits until they are there: its status naming them comes as an update, a claim
// created as an add of the claim.
type pendingPods struct {
	queue  workqueue.TypedInterface[*v1.Pod]
	writer *claimWriter

	mu      sync.Mutex
	queued  map[types.UID]bool
	waiting map[string][]*v1.Pod // claim (namespace/name) -> pods waiting for it
}

func newPending(queue workqueue.TypedInterface[*v1.Pod], writer *claimWriter) *pendingPods {
	return &pendingPods{
		queue: queue, writer: writer,
		queued: map[types.UID]bool{}, waiting: map[string][]*v1.Pod{},
	}
}

func (p *pendingPods) offer(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || !pending(pod) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queued[pod.UID] {
		return
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		key, named := p.writer.missing(pod)
		if !named {
			return
		}
		if key != "" {
			p.waiting[key] = append(p.waiting[key], pod)
			return
		}
	}
	p.queued[pod.UID] = true
	p.queue.Add(pod)
}

func (p *pendingPods) claimAdded(obj any) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	key := claim.Namespace + "/" + claim.Name
	p.mu.Lock()
	pods := p.waiting[key]
	delete(p.waiting, key)
	p.mu.Unlock()
	for _, pod := range pods {
		p.offer(pod)
	}
}

// pinned is the one node a pod's required node affinity names by metadata.name, as the
// DaemonSet controller pins its pods ("" if none): binding it elsewhere would make the ceiling
// one of wrong placements. Reading the pin decides nothing.
func pinned(pod *v1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 {
		return ""
	}
	f := terms[0].MatchFields[0]
	if f.Key != "metadata.name" || f.Operator != v1.NodeSelectorOpIn || len(f.Values) != 1 {
		return ""
	}
	return f.Values[0]
}

// bindOne binds pod to node, as kube-scheduler's DefaultBinder does, then records its event;
// whether the binding went through.
func bindOne(ctx context.Context, client kubernetes.Interface, recorder events.EventRecorder, pod *v1.Pod, node string) bool {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		if ctx.Err() == nil {
			klog.ErrorS(err, "Binding", "pod", klog.KObj(pod), "node", node)
		}
		return false
	}
	recorder.Eventf(pod, nil, v1.EventTypeNormal, reasonScheduled, actionBinding,
		"Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, node)
	return true
}
