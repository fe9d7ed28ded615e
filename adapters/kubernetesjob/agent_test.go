package kubernetesjob

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func fastOptions(cs kubernetes.Interface) Options {
	return Options{Options: jobagenttest.FastOptions(),
		Client: func(context.Context, kube.Cluster) (kubernetes.Interface, error) { return cs, nil },
		Limits: Limits{Namespaces: []string{"deploy"}, ServiceAccounts: []string{"default", "deployer"}}}
}

func newAgent(t *testing.T, r ports.JobReporter, o Options) *Agent {
	a := New(r, nil, o)
	t.Cleanup(a.Close)
	return a
}

func baseConfig() map[string]any {
	return map[string]any{"namespace": "deploy", "image": "registry.example.com/deployer:1.4", "command": []any{"/bin/deploy"},
		"args": []any{"--wait"}, "env": map[string]any{"LOG_LEVEL": "debug", "REPLICAS": 3.0}}
}

// setCondition ends Job ns/name with condition typ, as the Job controller
// would.
func setCondition(t *testing.T, cs kubernetes.Interface, ns, name string, typ batchv1.JobConditionType, reason string) {
	t.Helper()
	j, err := cs.BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason})
	if typ == batchv1.JobFailed {
		j.Status.Failed = 1
	} else {
		j.Status.Succeeded = 1
	}
	_, err = cs.BatchV1().Jobs(ns).UpdateStatus(t.Context(), j, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestDispatchCreatesTheDocumentedJob(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	cfg := baseConfig()
	cfg["labels"] = map[string]any{"team": "payments"}
	cfg["annotations"] = map[string]any{"example.com/owner": "ops"}
	cfg["serviceAccountName"] = "deployer"
	cfg["backoffLimit"] = 2.0
	cfg["activeDeadline"] = "30m"
	cfg["ttlAfterFinished"] = "1h"
	cfg["template"] = map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "batch"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "main",
			"env":       []any{map[string]any{"name": "LOG_LEVEL", "value": "info"}, map[string]any{"name": "KEEP", "value": "1"}},
			"resources": map[string]any{"limits": map[string]any{"memory": "256Mi"}}}}}}
	d := porttest.JobAgentDispatch(Type, "job-1", cfg)
	d.Release.Variables = map[string]release.Value{"VERSION": {Literal: "v2"}, "COUNT": {Literal: 2.0},
		"FLAGS": {Literal: map[string]any{"a": true}}, "DB_PASSWORD": {Sensitive: &release.SecretRef{Ref: "env:DB"}}, "bad key": {Literal: "x"}}
	res, err := newAgent(t, jobagenttest.NewReports(), fastOptions(cs)).Dispatch(t.Context(), d)
	require.NoError(t, err)
	name := JobName("job-1")
	require.Equal(t, ports.JobDispatchResult{ExternalID: "deploy/" + name, Status: release.JobInProgress, Message: "job deploy/" + name + " created"}, res)

	got, err := cs.BatchV1().Jobs("deploy").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	backoff, deadline, ttl := int32(2), int64(1800), int32(3600)
	ours := map[string]string{KeyLabel: name, kube.ManagedByLabel: kube.ManagedBy}
	want := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "deploy",
			Labels:      map[string]string{KeyLabel: name, kube.ManagedByLabel: kube.ManagedBy, "team": "payments"},
			Annotations: map[string]string{JobIDAnnotation: "job-1", AgentIDAnnotation: "agent-1", ReleaseIDAnnotation: "rel-1", "example.com/owner": "ops"}},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, ActiveDeadlineSeconds: &deadline, TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "batch", "team": "payments", KeyLabel: ours[KeyLabel], kube.ManagedByLabel: kube.ManagedBy},
					Annotations: map[string]string{"example.com/owner": "ops", JobIDAnnotation: "job-1"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: "deployer",
					Containers: []corev1.Container{{Name: "main", Image: "registry.example.com/deployer:1.4",
						Command: []string{"/bin/deploy"}, Args: []string{"--wait"},
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
						Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}, {Name: "KEEP", Value: "1"},
							{Name: "COUNT", Value: "2"}, {Name: "FLAGS", Value: `{"a":true}`}, {Name: "VERSION", Value: "v2"},
							{Name: "REPLICAS", Value: "3"}, {Name: "RECONCILER_JOB_ID", Value: "job-1"}}}}}}},
	}
	got.ManagedFields, got.ResourceVersion = nil, ""
	want.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = got.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	require.Equal(t, want, got, "the sensitive variable and the key that is no variable name are left out")

	var creates int
	for _, a := range cs.Actions() {
		if a.Matches("create", "jobs") {
			creates++
		}
	}
	require.Equal(t, 1, creates)
}

func TestFollowsTheJobToSucceeded(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	o := fastOptions(cs)
	o.MinPoll, o.MaxPoll = time.Hour, time.Hour // only the watch can wake the follower
	rep := jobagenttest.NewReports()
	res, err := newAgent(t, rep, o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
	require.NoError(t, err)
	setCondition(t, cs, "deploy", JobName("job-1"), batchv1.JobComplete, "CompletionsReached")
	got := rep.Terminal(t)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, "job-1", got.JobID)
	require.Equal(t, res.ExternalID, got.ExternalID)
	require.Equal(t, map[string]any{"job": JobName("job-1"), "namespace": "deploy", "active": 0, "succeeded": 1, "failed": 0}, got.Outputs)
	var watched bool
	for _, a := range cs.Actions() {
		if w, ok := a.(k8stesting.WatchAction); ok && a.GetResource().Resource == "jobs" {
			watched = w.GetWatchRestrictions().Fields.String() == "metadata.name="+JobName("job-1")
		}
	}
	require.True(t, watched, "the Job is followed by a watch on its name")
}

func TestFailedJobReportsThePodsReason(t *testing.T) {
	t.Parallel()
	name := JobName("job-1")
	older := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-aaaaa", Namespace: "deploy", Labels: map[string]string{JobNameLabel: name},
		CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}}
	last := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-bbbbb", Namespace: "deploy", Labels: map[string]string{JobNameLabel: name},
		CreationTimestamp: metav1.NewTime(time.Unix(200, 0))},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "deploy", Labels: map[string]string{JobNameLabel: "other"},
		CreationTimestamp: metav1.NewTime(time.Unix(300, 0))}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}
	cs := fake.NewClientset(older, last, other)
	rep := jobagenttest.NewReports()
	_, err := newAgent(t, rep, fastOptions(cs)).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
	require.NoError(t, err)
	setCondition(t, cs, "deploy", name, batchv1.JobFailed, "BackoffLimitExceeded")
	got := rep.Terminal(t)
	require.Equal(t, release.JobFailure, got.Status)
	require.Equal(t, "job deploy/"+name+" failed: BackoffLimitExceeded; pod "+name+"-bbbbb: container job OOMKilled (exit code 137)", got.Message)
	require.Equal(t, "pod "+name+"-bbbbb: container job OOMKilled (exit code 137)", got.Outputs["reason"])
}

func TestCancelDeletesTheJobInTheBackgroundAndReportsCancelled(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, fastOptions(cs))
	d := porttest.JobAgentDispatch(Type, "job-1", baseConfig())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent, Reason: "timed out"}))
	var deletes []k8stesting.DeleteAction
	for _, act := range cs.Actions() {
		if del, ok := act.(k8stesting.DeleteAction); ok {
			deletes = append(deletes, del)
		}
	}
	require.Len(t, deletes, 1)
	require.Equal(t, "deploy", deletes[0].GetNamespace())
	require.Equal(t, JobName("job-1"), deletes[0].GetName())
	require.Equal(t, metav1.DeletePropagationBackground, *deletes[0].GetDeleteOptions().PropagationPolicy)
	got := rep.Terminal(t)
	require.Equal(t, release.JobCancelled, got.Status)
	require.Contains(t, got.Message, "was deleted")

	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent}), "a Job that is gone")
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-2", ExternalID: res.ExternalID, Agent: d.Agent}),
		"another job's external id is not this job's Job")
	require.Len(t, cs.Actions(), len(cs.Actions()))
	n := 0
	for _, act := range cs.Actions() {
		if act.GetVerb() == "delete" && act.GetResource().Resource == "jobs" {
			n++
		}
	}
	require.Equal(t, 2, n, "the second job's cancel deleted nothing")
}

func TestCancelAfterARestartUsesTheAgentRecordsCluster(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	var asked []kube.Cluster
	var mu sync.Mutex
	o := fastOptions(cs)
	o.Client = func(_ context.Context, c kube.Cluster) (kubernetes.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, c)
		return cs, nil
	}
	d := porttest.JobAgentDispatch(Type, "job-1", baseConfig())
	res, err := newAgent(t, jobagenttest.NewReports(), o).Dispatch(t.Context(), d)
	require.NoError(t, err)
	restarted := newAgent(t, jobagenttest.NewReports(), o)
	d.Agent.Config = map[string]any{"kubeconfigRef": "file:/etc/kube/prod", "context": "prod"}
	require.NoError(t, restarted.CancelJob(t.Context(), ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent}))
	_, err = cs.BatchV1().Jobs("deploy").Get(t.Context(), JobName("job-1"), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	mu.Lock()
	require.Equal(t, kube.Cluster{KubeconfigRef: "file:/etc/kube/prod", Context: "prod"}, asked[len(asked)-1])
	mu.Unlock()
}

func TestCreateRetriedAfterACrashFollowsTheSameJob(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	o := fastOptions(cs)
	first := newAgent(t, jobagenttest.NewReports(), o)
	r1, err := first.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
	require.NoError(t, err)
	first.Close()
	rep := jobagenttest.NewReports()
	r2, err := newAgent(t, rep, o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	list, err := cs.BatchV1().Jobs("deploy").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	setCondition(t, cs, "deploy", JobName("job-1"), batchv1.JobComplete, "")
	require.Equal(t, release.JobSuccessful, rep.Terminal(t).Status)
}

func TestAJobOfTheSameNameOfAnotherJobIsRefused(t *testing.T) {
	t.Parallel()
	squatter := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: JobName("job-1"), Namespace: "deploy", Annotations: map[string]string{JobIDAnnotation: "job-9"}}}
	cs := fake.NewClientset(squatter)
	res, err := newAgent(t, jobagenttest.NewReports(), fastOptions(cs)).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, `belongs to job "job-9"`)
}

func TestServerErrorsAndRefusals(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	for _, tc := range []struct {
		name    string
		err     error
		status  release.JobStatus
		message string
	}{
		{"unavailable: an error, so the work item retries", apierrors.NewServiceUnavailable("etcd leader changed"), "", ""},
		{"no namespace", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "deploy"), release.JobInvalidJobAgent, "job_agent_config.namespace: the cluster has no namespace deploy"},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("RBAC: jobs.batch is forbidden")), release.JobInvalidJobAgent, "forbidden"},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x", nil), release.JobInvalidJobAgent, "is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := fake.NewClientset()
			once := true
			cs.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				if once {
					once = false
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			a := newAgent(t, jobagenttest.NewReports(), fastOptions(cs))
			res, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
			if tc.status == "" {
				require.ErrorContains(t, err, "kubernetes-job: create job deploy/"+JobName("job-1"))
				res, err = a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", baseConfig()))
				require.NoError(t, err)
				require.Equal(t, release.JobInProgress, res.Status, "the retry creates the Job")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.status, res.Status)
			require.Contains(t, res.Message, tc.message)
		})
	}
}

func TestBadConfigNamesTheField(t *testing.T) {
	t.Parallel()
	for field, mutate := range map[string]func(map[string]any){
		"job_agent_config.namespace":           func(c map[string]any) { delete(c, "namespace") },
		"job_agent_config.namespace ":          func(c map[string]any) { c["namespace"] = "Deploy_NS" },
		"job_agent_config.image":               func(c map[string]any) { delete(c, "image") },
		"job_agent_config.command[1]":          func(c map[string]any) { c["command"] = []any{"sh", 1.0} },
		"job_agent_config.args":                func(c map[string]any) { c["args"] = "--wait" },
		"job_agent_config.env.1BAD=":           func(c map[string]any) { c["env"] = map[string]any{"1BAD=": "x"} },
		"job_agent_config.labels.team":         func(c map[string]any) { c["labels"] = map[string]any{"team": "pay ments"} },
		"job_agent_config.annotations.bad key": func(c map[string]any) { c["annotations"] = map[string]any{"bad key": "x"} },
		"job_agent_config.backoffLimit":        func(c map[string]any) { c["backoffLimit"] = -1.0 },
		"job_agent_config.activeDeadline":      func(c map[string]any) { c["activeDeadline"] = "soon" },
		"job_agent_config.ttlAfterFinished":    func(c map[string]any) { c["ttlAfterFinished"] = "-1h" },
		"job_agent_config.template":            func(c map[string]any) { c["template"] = map[string]any{"spec": map[string]any{"containerz": []any{}}} },
		"job_agent_config.template.spec.restartPolicy": func(c map[string]any) {
			c["template"] = map[string]any{"spec": map[string]any{"restartPolicy": "Always"}}
		},
		"job_agent_config.kubeconfigRef":      func(c map[string]any) { c["kubeconfigRef"] = "apiVersion: v1" },
		"job_agent_config.serviceAccountName": func(c map[string]any) { c["serviceAccountName"] = "Not OK" },
	} {
		cfg := baseConfig()
		mutate(cfg)
		err := ValidateConfig(cfg)
		var fe *release.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", field, err)
		require.Equal(t, field[:len(fe.Field)], fe.Field, "%s: %v", field, err)
		cs := fake.NewClientset()
		res, derr := newAgent(t, jobagenttest.NewReports(), fastOptions(cs)).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", cfg))
		require.NoError(t, derr)
		require.Equal(t, release.JobInvalidJobAgent, res.Status)
		require.Contains(t, res.Message, fe.Field)
		require.Empty(t, cs.Actions(), "a bad config changes nothing in the cluster")
	}
	require.NoError(t, ValidateConfig(baseConfig()))
}

func TestConnectRefusalEndsTheJobInvalid(t *testing.T) {
	t.Parallel()
	cfg := baseConfig()
	cfg["kubeconfigRef"] = "env:RECONCILER_SECRET_KUBECONFIG"
	a := newAgent(t, jobagenttest.NewReports(), Options{Limits: Limits{Namespaces: []string{"deploy"}}}) // the real connector, with no secret resolver
	res, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", cfg))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, "job_agent_config.kubeconfigRef")
}

// complete plays the Job controller for the conformance suite: every Job
// created in cs gets the condition Complete.
func complete(t *testing.T, cs *fake.Clientset) {
	w, err := cs.BatchV1().Jobs("").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || len(j.Status.Conditions) > 0 || ev.Type == "DELETED" {
				continue
			}
			j = j.DeepCopy()
			j.Status.Succeeded = 1
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			_, _ = cs.BatchV1().Jobs(j.Namespace).UpdateStatus(context.Background(), j, metav1.UpdateOptions{})
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
}

// created counts the Jobs created in cs by name: a create of a Job that
// exists (AlreadyExists) creates nothing.
func created(cs *fake.Clientset) func(name string) int {
	var mu sync.Mutex
	n := map[string]int{}
	jobs := batchv1.SchemeGroupVersion.WithResource("jobs")
	cs.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		if _, err := cs.Tracker().Get(jobs, j.Namespace, j.Name); apierrors.IsNotFound(err) {
			mu.Lock()
			n[j.Name]++
			mu.Unlock()
		}
		return false, nil, nil // the tracker creates it (or refuses it)
	})
	return func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[name]
	}
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	type cluster struct {
		cs      *fake.Clientset
		created func(name string) int
	}
	clusters := map[*testing.T]cluster{} // one cluster per subtest, shared by its crash's two agents
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		mu.Lock()
		c, ok := clusters[t]
		if !ok {
			c.cs = fake.NewClientset()
			c.created = created(c.cs)
			clusters[t] = c
		}
		mu.Unlock()
		if !ok {
			complete(t, c.cs)
		}
		return newAgent(t, r, fastOptions(c.cs))
	}, porttest.JobAgentOptions{Config: baseConfig(), Durable: true, RunsOf: func(t *testing.T, jobID string) int {
		mu.Lock()
		defer mu.Unlock()
		return clusters[t].created(JobName(jobID))
	}})
}

// TestJobGoneAfterItsTTLIsNotCalledCancelled: with ttlAfterFinished set,
// a Job the follower finds gone may have ended and been removed by
// Kubernetes: the outcome is unknown (externalRunNotFound), not cancelled.
func TestJobGoneAfterItsTTLIsNotCalledCancelled(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	rep := jobagenttest.NewReports()
	cfg := baseConfig()
	cfg["ttlAfterFinished"] = "1m"
	_, err := newAgent(t, rep, fastOptions(cs)).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", cfg))
	require.NoError(t, err)
	require.NoError(t, cs.BatchV1().Jobs("deploy").Delete(t.Context(), JobName("job-1"), metav1.DeleteOptions{}))
	got := rep.Terminal(t)
	require.Equal(t, release.JobExternalRunNotFound, got.Status)
	require.Contains(t, got.Message, "ttlAfterFinished")
}

// TestJobsOutsideTheOperatorsLimitsAreRefused: finding 1 of issue 28 —
// with in-cluster credentials a write token ran any pod serve's RBAC
// allows. A namespace or service account outside the operator's lists, or
// a pod spec that reaches the node, is refused at apply (ValidateConfig and
// Limits.Check) and at dispatch, where nothing is created.
func TestJobsOutsideTheOperatorsLimitsAreRefused(t *testing.T) {
	t.Parallel()
	limits := Limits{Namespaces: []string{"deploy"}, ServiceAccounts: []string{"default", "deployer"}}
	spec := func(s map[string]any) map[string]any { return map[string]any{"spec": s} }
	ctr := func(sc map[string]any) map[string]any {
		return spec(map[string]any{"containers": []any{map[string]any{"name": "job", "securityContext": sc}}})
	}
	for _, tc := range []struct {
		name, key string
		val       any
		field     string
	}{
		{"allowed", "serviceAccountName", "deployer", ""},
		{"namespace outside the list", "namespace", "kube-system", "job_agent_config.namespace"},
		{"service account outside the list", "serviceAccountName", "cluster-admin", "job_agent_config.serviceAccountName"},
		{"template's service account", "template", spec(map[string]any{"serviceAccountName": "cluster-admin"}), "job_agent_config.template.spec.serviceAccountName"},
		{"template's deprecated service account", "template", spec(map[string]any{"serviceAccount": "cluster-admin"}), "job_agent_config.template.spec.serviceAccount"},
		{"hostNetwork", "template", spec(map[string]any{"hostNetwork": true}), "job_agent_config.template.spec.hostNetwork"},
		{"hostPID", "template", spec(map[string]any{"hostPID": true}), "job_agent_config.template.spec.hostPID"},
		{"hostIPC", "template", spec(map[string]any{"hostIPC": true}), "job_agent_config.template.spec.hostIPC"},
		{"hostPath", "template", spec(map[string]any{"volumes": []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}}}),
			"job_agent_config.template.spec.volumes[0].hostPath"},
		{"privileged", "template", ctr(map[string]any{"privileged": true}), "job_agent_config.template.spec.containers[0].securityContext.privileged"},
		{"allowPrivilegeEscalation", "template", ctr(map[string]any{"allowPrivilegeEscalation": true}),
			"job_agent_config.template.spec.containers[0].securityContext.allowPrivilegeEscalation"},
		{"added capabilities", "template", ctr(map[string]any{"capabilities": map[string]any{"add": []any{"NET_ADMIN"}}}),
			"job_agent_config.template.spec.containers[0].securityContext.capabilities.add"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg[tc.key] = tc.val
			cs := fake.NewClientset()
			o := fastOptions(cs)
			o.Limits = limits
			res, err := newAgent(t, jobagenttest.NewReports(), o).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", cfg))
			require.NoError(t, err)
			applyErr := ValidateConfig(cfg)
			if applyErr == nil {
				applyErr = limits.Check(cfg)
			}
			if tc.field == "" {
				require.NoError(t, applyErr)
				require.Equal(t, release.JobInProgress, res.Status)
				return
			}
			var fe *release.FieldError
			require.ErrorAs(t, applyErr, &fe)
			require.Equal(t, tc.field, fe.Field)
			require.Equal(t, release.JobInvalidJobAgent, res.Status)
			require.Contains(t, res.Message, tc.field)
			for _, a := range cs.Actions() {
				require.False(t, a.Matches("create", "jobs"), "nothing is created")
			}
		})
	}
}

func TestLimitsDefaultToTheDefaultNamespaceAndServiceAccount(t *testing.T) {
	t.Parallel()
	cfg := baseConfig()
	cfg["namespace"] = DefaultNamespace()
	require.NoError(t, Limits{}.Check(cfg))
	cfg["serviceAccountName"] = "deployer"
	require.ErrorContains(t, Limits{}.Check(cfg), "serve --kubernetes-service-account deployer allows it")
	cfg = baseConfig()
	cfg["namespace"] = "elsewhere"
	require.ErrorContains(t, Limits{}.Check(cfg), "serve --kubernetes-namespace elsewhere allows it")
}
