// Package kubernetes is the ports.AgentRuntime that runs each run's agent
// as one Kubernetes Pod, through client-go.
//
// A launch creates the pod of (run, launch key) in the configured
// namespace from a pod template, the image, command, args and plain
// environment of the Config plus RECONCILER_RUN_KIND, RECONCILER_RUN_ID,
// RECONCILER_PURPOSE, RECONCILER_TRIGGER and, for a repo run,
// RECONCILER_REPO and RECONCILER_BRANCH. Its name is derived from the run
// and the launch's idempotency key (PodName), so a launch retried after a
// crash answers AlreadyExists and starts nothing; it carries the labels
// ManagedByLabel, RunLabel (a hash of the run) and KindLabel, and the
// run's kind, id and key as annotations. A new launch of a run deletes the
// run's other pods first; a release deletes them (grace period
// Config.StopGrace). Pods outlive the daemon: a restarted runtime adopts
// the pods its informer lists.
//
// The runtime is the run's pod watcher: an informer on the namespace's
// pods (label ManagedByLabel=reconciler, resynced every Heartbeat) feeds
// one observer per pod, which writes through the run store what it sees
// (phase with its Since, a heartbeat while the pod lives, the exit code
// of a pod that ended) and wakes the run at once after a phase change;
// like the process runtime it waits for the launch's move to land before
// the first observation and for the running state before an exit
// (internal/runobserve). The kernel's heartbeat staleness rule catches
// what is missed. A review pod's agent writes its review to
// RECONCILER_REVIEW_FILE, its container's termination message (path
// TerminationMessagePath unless the template names one; first line
// "review-event: VERDICT" optional): a successful exit reports it as the
// run's review draft, marked cut when it fills Kubernetes's
// MaxTerminationMessage bytes.
//
// Invariants: one pod per run (a new launch deletes the previous
// attempt's); launches and releases are idempotent by key (the pod name is
// the record; a bounded record of keys seen spares the API calls); only
// the run's current pod, not being deleted, writes observations; the
// kubeconfig is resolved through the SecretResolver and never logged.
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// Labels and annotations on every agent pod.
const (
	// RunLabel carries a hash of the run (RunHash): run ids need not be
	// label values.
	RunLabel = "reconciler.dev/run"
	// KindLabel carries the run's kind.
	KindLabel = "reconciler.dev/run-kind"
	// RunIDAnnotation, KindAnnotation and KeyAnnotation carry the run's
	// id, its kind and the launch's idempotency key.
	RunIDAnnotation = "reconciler.dev/run-id"
	KindAnnotation  = "reconciler.dev/run-kind"
	KeyAnnotation   = "reconciler.dev/launch-key"
	// ContainerName names the agent's container when the template has
	// none.
	ContainerName = "agent"
	// TerminationMessagePath is where a review agent's container writes
	// its review (RECONCILER_REVIEW_FILE) when the template names no
	// terminationMessagePath: Kubernetes's default.
	TerminationMessagePath = "/dev/termination-log"
	// MaxTerminationMessage is the most Kubernetes keeps of a container's
	// termination message, so of a review brought back from a pod.
	MaxTerminationMessage = 4096
)

// Defaults used when Config leaves a knob at zero.
const (
	DefaultStopGrace = 30 * time.Second
	DefaultHeartbeat = 30 * time.Second
	DefaultLandWait  = 2 * time.Minute
)

// Config says what an agent pod is.
type Config struct {
	// Namespace is where the pods run (required).
	Namespace string
	// Image, Command and Args set the first container's (Image is
	// required unless the template's first container has one).
	Image         string
	Command, Args []string
	// Env are plain environment variables of every agent. Secrets reach
	// agents through the template (a Kubernetes Secret), never through
	// reconciler: a resolved value would be stored in the pod's spec.
	Env map[string]string
	// Template is the pod every agent pod starts from (its metadata and
	// spec: resources, volumes, a service account).
	Template corev1.PodTemplateSpec
	// StopGrace is the pod's deletion grace period (default 30 s).
	StopGrace time.Duration
	// Heartbeat is how often a live pod's heartbeat is written, and the
	// informer's resync period (default 30 s).
	Heartbeat time.Duration
	// LandWait bounds the wait for the run's state (DefaultLandWait).
	LandWait time.Duration
}

// Validate checks the configuration, naming the wrong field.
func (c Config) Validate() error {
	if !kube.IsDNSLabel(c.Namespace) {
		return fmt.Errorf("kubernetes runtime: Namespace %q is not a namespace name", c.Namespace)
	}
	if c.Image == "" && (len(c.Template.Spec.Containers) == 0 || c.Template.Spec.Containers[0].Image == "") {
		return errors.New("kubernetes runtime: Image is empty and the template's first container has none")
	}
	for name := range c.Env {
		if !kube.IsEnvName(name) {
			return fmt.Errorf("kubernetes runtime: Env: %q is not a variable name", name)
		}
	}
	if rp := c.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyNever {
		return fmt.Errorf("kubernetes runtime: the template's restartPolicy must be Never (an agent's exit is the run's), not %s", rp)
	}
	if c.StopGrace < 0 || c.Heartbeat < 0 || c.LandWait < 0 {
		return errors.New("kubernetes runtime: StopGrace, Heartbeat and LandWait must not be negative")
	}
	return nil
}

// Options are the runtime's collaborators.
type Options struct {
	// Client reaches the cluster (required).
	Client clientset.Interface
	// Store receives the observations and gives a repo run's repository.
	Store ports.RunStore
	// Clock stamps observations (default ports.SystemClock).
	Clock ports.Clock
	// Wake enqueues the run after a phase change (nil: no wake-up).
	Wake func(context.Context, reconcile.RunRef)
	// Branch is the branch a repo run's agent pushes to
	// (RECONCILER_BRANCH); default "reconciler/" and the run id.
	Branch func(reconcile.RunRef) string
	// Exit, when set, may add to the observation of an agent's exit before
	// it is written (serve opens a repo agent's pull request); the working
	// directory argument is empty: the agent's files are in its pod.
	Exit   func(ctx context.Context, ref reconcile.RunRef, workDir string, o *ports.RunObserveParams)
	Logger *slog.Logger
}

// Runtime is the Kubernetes ports.AgentRuntime. Start it before use,
// Close it when done.
type Runtime struct {
	cfg  Config
	opt  Options
	out  runobserve.Writer
	pods cache.SharedIndexInformer
	stop chan struct{}
	// launches and releases are the keys acted on (bounded; the pod
	// name is the record that counts).
	launches, releases *runobserve.Keys

	mu       sync.Mutex
	watchers map[string]*watcher // by pod name
	closed   bool
	wg       sync.WaitGroup
}

var _ ports.AgentRuntime = (*Runtime)(nil)

// New returns a runtime for cfg; Start begins watching.
func New(cfg Config, opt Options) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt.Client == nil || opt.Store == nil {
		return nil, errors.New("kubernetes runtime: Options.Client and Options.Store are required")
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.LandWait == 0 {
		cfg.LandWait = DefaultLandWait
	}
	if opt.Branch == nil {
		opt.Branch = func(ref reconcile.RunRef) string { return "reconciler/" + ref.ID }
	}
	out := runobserve.NewWriter(opt.Store, opt.Clock, opt.Wake, opt.Logger, opt.Exit, cfg.LandWait)
	factory := informers.NewSharedInformerFactoryWithOptions(opt.Client, cfg.Heartbeat, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = kube.ManagedByLabel + "=" + kube.ManagedBy + "," + RunLabel
		}))
	r := &Runtime{cfg: cfg, opt: opt, out: out, launches: runobserve.NewKeys(0), releases: runobserve.NewKeys(0),
		stop: make(chan struct{}), watchers: map[string]*watcher{}, pods: factory.Core().V1().Pods().Informer()}
	_, err := r.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { r.onPod(obj, false) },
		DeleteFunc: func(obj any) { r.onPod(obj, true) },
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime: %w", err)
	}
	return r, nil
}

// Start runs the pod informer and waits for its first listing: the pods
// that already exist (a restart's) are adopted.
func (r *Runtime) Start(ctx context.Context) error {
	go r.pods.Run(r.stop)
	if !cache.WaitForCacheSync(ctx.Done(), r.pods.HasSynced) {
		return fmt.Errorf("kubernetes runtime: pods of namespace %s not listed: %w", r.cfg.Namespace, context.Cause(ctx))
	}
	return nil
}

// RunHash is the value of RunLabel for ref.
func RunHash(ref reconcile.RunRef) string {
	sum := sha256.Sum256([]byte(ref.String()))
	return hex.EncodeToString(sum[:8])
}

// PodName is the name of the pod of ref's launch with idempotency key:
// "reconciler-", the kind, the run's hash and 8 hex digits of the key's.
func PodName(ref reconcile.RunRef, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "reconciler-" + string(ref.Kind) + "-" + RunHash(ref) + "-" + hex.EncodeToString(sum[:4])
}

// AgentLaunch creates the launch's pod (logged as agent.start) after
// deleting the run's other pods (agent.replace); a pod that exists already (the launch retried) is left as it is.
func (r *Runtime) AgentLaunch(ctx context.Context, p ports.AgentLaunchParams) error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("launch %s: kubernetes runtime closed", p.Ref)
	}
	if r.launches.Has(p.IdempotencyKey) {
		return nil
	}
	name := PodName(p.Ref, p.IdempotencyKey)
	if err := r.deletePods(ctx, p.Ref, name, "agent.replace"); err != nil {
		return fmt.Errorf("launch %s: stop the previous attempt: %w", p.Ref, err)
	}
	pod, err := r.pod(ctx, p, name)
	if err != nil {
		return err
	}
	_, err = r.opt.Client.CoreV1().Pods(r.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "reconciler"})
	switch {
	case err == nil:
		r.out.Logger.Info("agent.start", "kind", p.Ref.Kind, "id", p.Ref.ID, "purpose", p.Purpose, "pod", name, "namespace", r.cfg.Namespace)
	case apierrors.IsAlreadyExists(err): // the launch retried: its pod runs
	default:
		return fmt.Errorf("launch %s: create pod %s/%s: %w", p.Ref, r.cfg.Namespace, name, err)
	}
	r.launches.Add(p.IdempotencyKey)
	return nil
}

// pod is the pod of launch p.
func (r *Runtime) pod(ctx context.Context, p ports.AgentLaunchParams, name string) (*corev1.Pod, error) {
	env := map[string]string{
		"RECONCILER_RUN_KIND": string(p.Ref.Kind),
		"RECONCILER_RUN_ID":   p.Ref.ID,
		"RECONCILER_PURPOSE":  string(p.Purpose),
		"RECONCILER_TRIGGER":  p.Trigger,
	}
	if p.Ref.Kind == reconcile.KindRepo {
		row, err := r.opt.Store.RunGet(ctx, p.Ref)
		if err != nil {
			return nil, fmt.Errorf("launch %s: read run: %w", p.Ref, err)
		}
		env["RECONCILER_REPO"], env["RECONCILER_BRANCH"] = row.Repo, r.opt.Branch(p.Ref)
	}
	tpl := r.cfg.Template.DeepCopy()
	ours := map[string]string{kube.ManagedByLabel: kube.ManagedBy, RunLabel: RunHash(p.Ref), KindLabel: string(p.Ref.Kind)}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.cfg.Namespace, Labels: kube.Merge(tpl.Labels, ours),
			Annotations: kube.Merge(tpl.Annotations, map[string]string{RunIDAnnotation: p.Ref.ID, KindAnnotation: string(p.Ref.Kind), KeyAnnotation: p.IdempotencyKey})},
		Spec: tpl.Spec,
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	grace := int64(r.cfg.StopGrace / time.Second)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: ContainerName}}
	}
	c := &pod.Spec.Containers[0]
	if r.cfg.Image != "" {
		c.Image = r.cfg.Image
	}
	if r.cfg.Command != nil {
		c.Command = r.cfg.Command
	}
	if r.cfg.Args != nil {
		c.Args = r.cfg.Args
	}
	if p.Ref.Kind == reconcile.KindPRReview {
		// The review comes back as the container's termination message.
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = TerminationMessagePath
		}
		env["RECONCILER_REVIEW_FILE"] = c.TerminationMessagePath
	}
	kube.SetEnv(c, r.cfg.Env)
	kube.SetEnv(c, env)
	return pod, nil
}

// AgentRelease deletes the run's pods (each logged as agent.release); a run
// without a pod is released without error.
func (r *Runtime) AgentRelease(ctx context.Context, ref reconcile.RunRef, key string) error {
	if r.releases.Has(key) {
		return nil
	}
	if err := r.deletePods(ctx, ref, "", "agent.release"); err != nil {
		return fmt.Errorf("release %s: %w", ref, err)
	}
	r.releases.Add(key)
	return nil
}

// deletePods stops observing and deletes every pod of ref but keep,
// logging each deletion as event.
func (r *Runtime) deletePods(ctx context.Context, ref reconcile.RunRef, keep, event string) error {
	pods := r.opt.Client.CoreV1().Pods(r.cfg.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: kube.ManagedByLabel + "=" + kube.ManagedBy + "," + RunLabel + "=" + RunHash(ref)})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	grace := int64(r.cfg.StopGrace / time.Second)
	bg := metav1.DeletePropagationBackground
	for i := range list.Items {
		p := &list.Items[i]
		if p.Name == keep || p.DeletionTimestamp != nil || refOf(p) != ref {
			continue
		}
		r.forget(p.Name)
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &bg})
		switch {
		case err == nil:
			r.out.Logger.Info(event, "kind", ref.Kind, "id", ref.ID, "pod", p.Name, "grace", r.cfg.StopGrace)
		case apierrors.IsNotFound(err):
		default:
			return fmt.Errorf("delete pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// refOf is the run a pod belongs to, from its annotations.
func refOf(p *corev1.Pod) reconcile.RunRef {
	return reconcile.RunRef{Kind: reconcile.RunKind(p.Annotations[KindAnnotation]), ID: p.Annotations[RunIDAnnotation]}
}

// Close stops the informer and the observers and waits for them; the pods
// run on (a restarted runtime adopts them). Later launches fail.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	for name, w := range r.watchers {
		w.end()
		delete(r.watchers, name)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
