package kubernetes

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/internal/runobserve/runobservetest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// cluster is client-go's fake clientset with a record of the pods it
// really created and deleted (a create of a pod that exists, or a delete
// of one that is gone, changes nothing and is not counted).
type cluster struct {
	*fake.Clientset
	mu               sync.Mutex
	created, deleted map[string][]*corev1.Pod // by run id
	deleteOptions    []metav1.DeleteOptions
}

func newCluster(objs ...runtime.Object) *cluster {
	c := &cluster{Clientset: fake.NewClientset(objs...), created: map[string][]*corev1.Pod{}, deleted: map[string][]*corev1.Pod{}}
	// Reactors run under the fake's lock, so the check and the count are
	// one step.
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if _, err := c.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name); err != nil {
			c.mu.Lock()
			c.created[p.Annotations[RunIDAnnotation]] = append(c.created[p.Annotations[RunIDAnnotation]], p.DeepCopy())
			c.mu.Unlock()
		}
		return false, nil, nil
	})
	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		obj, err := c.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), d.GetNamespace(), d.GetName())
		if err == nil {
			p := obj.(*corev1.Pod)
			c.mu.Lock()
			c.deleted[p.Annotations[RunIDAnnotation]] = append(c.deleted[p.Annotations[RunIDAnnotation]], p.DeepCopy())
			c.deleteOptions = append(c.deleteOptions, d.GetDeleteOptions())
			c.mu.Unlock()
		}
		return false, nil, nil
	})
	return c
}

func (c *cluster) count(m map[string][]*corev1.Pod, ref reconcile.RunRef) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range m[ref.ID] {
		if refOf(p) == ref {
			n++
		}
	}
	return n
}

// setPhase moves pod name to phase with the given container state, as
// the kubelet would.
func (c *cluster) setPhase(t *testing.T, name string, phase corev1.PodPhase, state corev1.ContainerState, ready bool) {
	t.Helper()
	p, err := c.CoreV1().Pods("agents").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, State: state, Ready: ready}}
	_, err = c.CoreV1().Pods("agents").UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

type bundle struct {
	events *runobservetest.Events
	rt     *Runtime
	c      *cluster
	store  *runobservetest.Store
	wakes  chan reconcile.RunRef
}

func baseConfig() Config {
	return Config{Namespace: "agents", Image: "ghcr.io/acme/agent:2", Command: []string{"/agent"}, Args: []string{"--once"},
		Env: map[string]string{"MODEL": "large"}, StopGrace: 15 * time.Second, Heartbeat: time.Hour, LandWait: 10 * time.Second}
}

func setup(t *testing.T, cfg Config, objs ...runtime.Object) bundle {
	t.Helper()
	return setupWith(t, cfg, runobservetest.NewStore("acme/shop"), objs...)
}

// setupWith starts a runtime on store and a cluster holding objs.
func setupWith(t *testing.T, cfg Config, store *runobservetest.Store, objs ...runtime.Object) bundle {
	t.Helper()
	b := bundle{c: newCluster(objs...), wakes: make(chan reconcile.RunRef, 64), store: store, events: &runobservetest.Events{}}
	rt, err := New(cfg, Options{Client: b.c, Store: b.store, Logger: b.events.Logger(),
		Wake:   func(_ context.Context, ref reconcile.RunRef) { b.wakes <- ref },
		Branch: func(ref reconcile.RunRef) string { return "reconciler/" + ref.ID }})
	require.NoError(t, err)
	require.NoError(t, rt.Start(t.Context()))
	t.Cleanup(rt.Close)
	b.rt = rt
	return b
}

func (b bundle) next(t *testing.T) ports.RunObserveParams {
	t.Helper()
	return b.store.Next(t)
}

func TestAgentRuntimeConformance(t *testing.T) {
	t.Parallel()
	porttest.AgentRuntime(t, func(t *testing.T) porttest.AgentRuntimeFixture {
		store := runobservetest.NewStore("acme/shop")
		store.Every = true
		b := setupWith(t, baseConfig(), store)
		return porttest.AgentRuntimeFixture{Runtime: b.rt,
			// Pods the cluster really created; releases the runtime logged
			// (a new launch also deletes the previous pod: agent.replace).
			Launched: func(ref reconcile.RunRef) int { return b.c.count(b.c.created, ref) },
			Released: func(ref reconcile.RunRef) int { return b.events.Count("agent.release", ref) }}
	})
}

func TestLaunchCreatesThePodFromTheTemplate(t *testing.T) {
	t.Parallel()
	cfg := baseConfig()
	cfg.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "ai"}},
		Spec: corev1.PodSpec{ServiceAccountName: "agent", Containers: []corev1.Container{{Name: "main",
			Env:       []corev1.EnvVar{{Name: "MODEL", Value: "small"}, {Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agent"}, Key: "token"}}}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
	b := setup(t, cfg)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "run-1"}
	b.store.Set(ref, reconcile.RepoQueued)
	key := ref.String() + "/1/launch"
	require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: key}))
	name := PodName(ref, key)
	require.Regexp(t, `^reconciler-repo-[0-9a-f]{16}-[0-9a-f]{8}$`, name)
	got, err := b.c.CoreV1().Pods("agents").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	grace := int64(15)
	want := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents",
			Labels:      map[string]string{"team": "ai", kube.ManagedByLabel: kube.ManagedBy, RunLabel: RunHash(ref), KindLabel: "repo"},
			Annotations: map[string]string{RunIDAnnotation: "run-1", KindAnnotation: "repo", KeyAnnotation: key}},
		Spec: corev1.PodSpec{ServiceAccountName: "agent", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: "ghcr.io/acme/agent:2", Command: []string{"/agent"}, Args: []string{"--once"},
				Resources: cfg.Template.Spec.Containers[0].Resources,
				Env: []corev1.EnvVar{{Name: "MODEL", Value: "large"}, cfg.Template.Spec.Containers[0].Env[1],
					{Name: "RECONCILER_BRANCH", Value: "reconciler/run-1"}, {Name: "RECONCILER_PURPOSE", Value: "run"},
					{Name: "RECONCILER_REPO", Value: "acme/shop"}, {Name: "RECONCILER_RUN_ID", Value: "run-1"},
					{Name: "RECONCILER_RUN_KIND", Value: "repo"}, {Name: "RECONCILER_TRIGGER", Value: ""}}}}}}
	got.ManagedFields, got.ResourceVersion = nil, ""
	require.Equal(t, want, got)
	require.Equal(t, map[string]string{"team": "ai"}, cfg.Template.Labels, "the template is not changed")
}

func TestObservesThePodsPhasesAndExit(t *testing.T) {
	t.Parallel()
	b := setup(t, baseConfig())
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "run-1"}
	b.store.Set(ref, reconcile.RepoQueued)
	key := ref.String() + "/1/launch"
	require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: key}))
	name := PodName(ref, key)
	m := reconcile.MachineFor(ref.Kind)
	b.store.Set(ref, m.Agent[0]) // the launch's move landed
	o := b.next(t)
	require.Equal(t, reconcile.PodPending, o.Pod.Phase)
	require.Equal(t, name, o.Pod.Name)
	require.Equal(t, ref, <-b.wakes)

	b.c.setPhase(t, name, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, true)
	o = b.next(t)
	require.Equal(t, reconcile.PodReady, o.Pod.Phase)
	require.False(t, o.Heartbeat.IsZero())

	b.c.setPhase(t, name, corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}, false)
	select {
	case o := <-b.store.Observed:
		t.Fatalf("the exit is written before the run is running: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	b.store.Set(ref, m.Agent[len(m.Agent)-1])
	o = b.next(t)
	require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
	require.Equal(t, 0, *o.Pod.ExitCode)
	require.Nil(t, o.Patch, "a repo run's exit reports no done fact")
}

func TestFailedPodsAndStuckContainers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		phase     corev1.PodPhase
		state     corev1.ContainerState
		reason    string
		want      reconcile.PodPhase
		code      int
		lastError string
	}{
		{"exit code", corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}, "",
			reconcile.PodTerminated, 137, "container agent OOMKilled (exit code 137)"},
		{"evicted", corev1.PodFailed, corev1.ContainerState{}, "Evicted", reconcile.PodError, -1, "Evicted:"},
		{"image", corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}, "",
			reconcile.PodError, -1, "container agent ImagePullBackOff not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, baseConfig())
			ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
			m := reconcile.MachineFor(ref.Kind)
			b.store.Set(ref, m.Agent[len(m.Agent)-1])
			key := ref.String() + "/1/launch"
			require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: key}))
			require.Equal(t, reconcile.PodPending, b.next(t).Pod.Phase)
			p, err := b.c.CoreV1().Pods("agents").Get(t.Context(), PodName(ref, key), metav1.GetOptions{})
			require.NoError(t, err)
			p.Status.Phase, p.Status.Reason = tc.phase, tc.reason
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: tc.state}}
			_, err = b.c.CoreV1().Pods("agents").UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
			require.NoError(t, err)
			o := b.next(t)
			require.Equal(t, tc.want, o.Pod.Phase)
			require.Contains(t, o.Pod.LastError, tc.lastError)
			if tc.code >= 0 {
				require.Equal(t, tc.code, *o.Pod.ExitCode)
			} else {
				require.Nil(t, o.Pod.ExitCode)
			}
			require.Nil(t, o.Patch)
		})
	}
}

func TestNewLaunchAndReleaseDeleteThePods(t *testing.T) {
	t.Parallel()
	b := setup(t, baseConfig())
	ref := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "agent-1"}
	other := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "agent-2"}
	for _, r := range []reconcile.RunRef{ref, other} {
		require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: r, Purpose: ports.PurposeTurn, IdempotencyKey: r.String() + "/1/turn"}))
	}
	require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeTurn, IdempotencyKey: ref.String() + "/2/turn"}))
	list, err := b.c.CoreV1().Pods("agents").List(t.Context(), metav1.ListOptions{LabelSelector: RunLabel + "=" + RunHash(ref)})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "one pod per run")
	require.Equal(t, PodName(ref, ref.String()+"/2/turn"), list.Items[0].Name)
	require.Equal(t, 1, b.c.count(b.c.deleted, ref))

	require.NoError(t, b.rt.AgentRelease(t.Context(), ref, ref.String()+"/3/release"))
	list, err = b.c.CoreV1().Pods("agents").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	require.Equal(t, PodName(other, other.String()+"/1/turn"), list.Items[0].Name, "the other run's pod stays")
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	require.Len(t, b.c.deleteOptions, 2)
	for _, o := range b.c.deleteOptions {
		require.Equal(t, int64(15), *o.GracePeriodSeconds)
	}
}

func TestARestartedRuntimeAdoptsItsPods(t *testing.T) {
	t.Parallel()
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
	key := ref.String() + "/1/launch"
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: PodName(ref, key), Namespace: "agents",
		Labels:      map[string]string{kube.ManagedByLabel: kube.ManagedBy, RunLabel: RunHash(ref), KindLabel: string(ref.Kind)},
		Annotations: map[string]string{RunIDAnnotation: ref.ID, KindAnnotation: string(ref.Kind), KeyAnnotation: key}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	stranger := running.DeepCopy()
	stranger.Name, stranger.Labels = "not-ours", map[string]string{"app": "web"}
	m := reconcile.MachineFor(ref.Kind)
	store := runobservetest.NewStore("acme/shop")
	store.Set(ref, m.Agent[len(m.Agent)-1])
	b := setupWith(t, baseConfig(), store, running, stranger)
	o := b.next(t)
	require.Equal(t, ref, o.Ref)
	require.Equal(t, reconcile.PodRunning, o.Pod.Phase)
	require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: key}))
	require.Zero(t, b.c.count(b.c.created, ref), "the launch retried after the restart finds its pod")
	b.c.setPhase(t, running.Name, corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, false)
	o = b.next(t)
	require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
}

func TestConfigIsChecked(t *testing.T) {
	t.Parallel()
	for want, mutate := range map[string]func(*Config){
		"Namespace":     func(c *Config) { c.Namespace = "Agents" },
		"Image":         func(c *Config) { c.Image = "" },
		"Env":           func(c *Config) { c.Env = map[string]string{"1X": "y"} },
		"restartPolicy": func(c *Config) { c.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
		"negative":      func(c *Config) { c.StopGrace = -time.Second },
	} {
		cfg := baseConfig()
		mutate(&cfg)
		require.ErrorContains(t, cfg.Validate(), want)
	}
	_, err := New(baseConfig(), Options{})
	require.ErrorContains(t, err, "Options.Client")
}

// TestAReviewComesBackAsTheTerminationMessage: a review pod's agent writes
// its review to RECONCILER_REVIEW_FILE, its container's termination
// message; the exit reports it as the run's review draft, its first line
// the verdict, cut at Kubernetes's 4096 bytes and saying so.
func TestAReviewComesBackAsTheTerminationMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxTerminationMessage/2) // exactly the limit: Kubernetes may have cut it
	for _, tc := range []struct {
		name, message string
		want          *reconcile.ReviewDraft
	}{
		{"verdict and body", "review-event: request_changes\nPlease handle the nil case.",
			&reconcile.ReviewDraft{Body: "Please handle the nil case.", Event: "REQUEST_CHANGES"}},
		{"body only", "Looks good.", &reconcile.ReviewDraft{Body: "Looks good."}},
		{"none", "", nil},
		{"at the limit", long, &reconcile.ReviewDraft{Body: long +
			"\n\n(reconciler: the agent's review may be longer; its runtime brings back at most 4096 bytes.)", Truncated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, baseConfig())
			ref := reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "rv-1"}
			b.store.Set(ref, reconcile.ReviewRunning)
			key := ref.String() + "/1/review"
			require.NoError(t, b.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeReview, IdempotencyKey: key}))
			require.Equal(t, reconcile.PodPending, b.next(t).Pod.Phase)
			p, err := b.c.CoreV1().Pods("agents").Get(t.Context(), PodName(ref, key), metav1.GetOptions{})
			require.NoError(t, err)
			c := p.Spec.Containers[0]
			require.Equal(t, TerminationMessagePath, c.TerminationMessagePath)
			require.Contains(t, c.Env, corev1.EnvVar{Name: "RECONCILER_REVIEW_FILE", Value: TerminationMessagePath})
			b.c.setPhase(t, p.Name, corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: tc.message}}, false)
			o := b.next(t)
			require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
			require.Equal(t, true, o.Patch["review_done"])
			require.Contains(t, o.Patch, "review", "an exit always sets the draft, clearing an earlier review's")
			require.Equal(t, tc.want, o.Patch["review"])
		})
	}
}
