// Package kubernetesjob is the "kubernetes-job" job agent: it creates a
// batch/v1 Job from the job's config (namespace, image, command, env, a
// pod template) through client-go, follows the Job by a watch with the
// backoff polls as resync, and deletes it (propagation Background) on
// CancelJob.
//
// Idempotency: the Job's name is the job's correlation key
// (jobfollow.CorrelationKey: "reconciler-" and 20 hex digits), so a
// create retried after a crash answers AlreadyExists and the agent
// follows the Job that exists; the Job carries the key as the label
// reconciler.dev/job and the job id as the annotation
// reconciler.dev/job-id, and a Job of that name carrying another job id
// is refused, never followed.
//
// Outcomes: the condition Complete → successful; Failed → failure with
// the Job's reason and the failed pod's (OOMKilled, exit code 137); a Job
// deleted, or being deleted, → cancelled. Credentials: the kubeconfig is
// a secret reference resolved through the SecretResolver (default: the
// in-cluster config), never logged or stored.
//
// Invariants: The Job's name is the job's correlation key, so a retried
// create finds it (`AlreadyExists`) and a Job of that name carrying another
// job's id is refused; sensitive variables never reach the Job's spec; a Job
// deleted or being deleted reports `cancelled`, a failed one the last failed
// pod's reason; the kubeconfig only through `SecretResolver`
package kubernetesjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type this agent serves.
const Type = "kubernetes-job"

// Labels and annotations on the Job and its pods.
const (
	// KeyLabel carries the job's correlation key (also the Job's name).
	KeyLabel = "reconciler.dev/job"
	// JobIDAnnotation carries the job id.
	JobIDAnnotation = "reconciler.dev/job-id"
	// ReleaseIDAnnotation carries the release id, when the job has one.
	ReleaseIDAnnotation = "reconciler.dev/release-id"
	// AgentIDAnnotation carries the job agent record's id.
	AgentIDAnnotation = "reconciler.dev/agent-id"
	// JobNameLabel is the label the Job controller puts on its pods.
	JobNameLabel = "batch.kubernetes.io/job-name"
	// ContainerName names the container the agent fills in when the
	// template has none.
	ContainerName = "job"
)

// Options configures an Agent; zero fields take defaults. Its MinPoll
// and MaxPoll bound the resync polls between watch events; HTTP is
// unused (client-go has its own client).
type Options struct {
	jobagent.Options
	// Client returns the clientset of a cluster; default a kube.Connector
	// over the agent's SecretResolver. Tests pass client-go's fake.
	Client func(ctx context.Context, c kube.Cluster) (kubernetes.Interface, error)
	// Limits are the namespaces and service accounts the Jobs may use;
	// a Job outside them ends invalidJobAgent before anything is created.
	Limits Limits
}

// Agent is the kubernetes-job job agent; goroutine-safe. Close it when
// done.
type Agent struct {
	*jobagent.Base[config]
	client func(ctx context.Context, c kube.Cluster) (kubernetes.Interface, error)
	retry  time.Duration
	limits Limits
}

var (
	_ ports.JobAgent    = (*Agent)(nil)
	_ ports.JobCanceler = (*Agent)(nil)
	_ ports.JobResumer  = (*Agent)(nil)
)

// New returns an agent reporting through reporter and reading kubeconfigs
// through secrets.
func New(reporter ports.JobReporter, secrets ports.SecretResolver, o Options) *Agent {
	if o.Client == nil {
		conn := &kube.Connector{Secrets: secrets, Field: "job_agent_config"}
		o.Client = conn.Client
	}
	retry := o.MinPoll
	if retry <= 0 {
		retry = 2 * time.Second
	}
	return &Agent{Base: jobagent.New[config](Type, reporter, secrets, o.Options), client: o.Client, retry: retry, limits: o.Limits}
}

// JobName is the name of job id's Job: its correlation key.
func JobName(jobID string) string { return jobfollow.CorrelationKey(jobID) }

// Dispatch creates the job's Job once (see the package doc). A bad config,
// an unreadable kubeconfig, a namespace the cluster does not have or a Job
// the API server refuses ends the job invalidJobAgent.
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Start(ctx, d, a.begin(d))
}

// ResumeJob follows the job's Job again (ports.JobResumer): by its
// external id (namespace/name), never creating it again (a Job that is
// gone was deleted: cancelled); without one, as Dispatch.
func (a *Agent) ResumeJob(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Resume(ctx, d, parseConfig, func(ctx context.Context, cfg config) (jobfollow.Started, error) {
		ns, name := cfg.namespace, JobName(d.Job.ID)
		if d.Job.ExternalID != ns+"/"+name {
			return jobfollow.Started{}, release.Invalid("job.external_id", "want "+ns+"/"+name+", got "+d.Job.ExternalID)
		}
		cs, err := a.client(ctx, cfg.cluster)
		if err != nil {
			return jobfollow.Started{}, fmt.Errorf("%s: connect: %w", Type, err)
		}
		return jobfollow.Started{
			Poll: func(ctx context.Context) (jobfollow.State, error) {
				return poll(ctx, cs, ns, name, d.Job.ID, cfg.ttlSet)
			},
			Watch: func(ctx context.Context, changed chan<- struct{}) { a.watch(ctx, cs, ns, name, changed) },
		}, nil
	}, a.begin(d))
}

// begin is the start of d's Job: created once (see the package doc), or
// found by its name.
func (a *Agent) begin(d ports.JobDispatch) func(ctx context.Context) (jobfollow.Started, error) {
	return func(ctx context.Context) (jobfollow.Started, error) {
		cfg, err := parseConfig(d.Job.JobAgentConfig)
		if err == nil {
			err = a.limits.check(cfg)
		}
		if err != nil {
			return a.Invalid(err)
		}
		cs, err := a.client(ctx, cfg.cluster)
		if err != nil {
			if errors.Is(err, release.ErrInvalid) {
				return a.Invalid(err)
			}
			return jobfollow.Started{}, fmt.Errorf("%s: connect: %w", Type, err)
		}
		job := buildJob(d, cfg)
		jobs := cs.BatchV1().Jobs(cfg.namespace)
		_, err = jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: "reconciler"})
		switch {
		case err == nil:
		case apierrors.IsAlreadyExists(err): // created by the attempt before a crash
			got, gerr := jobs.Get(ctx, job.Name, metav1.GetOptions{})
			if gerr != nil {
				return jobfollow.Started{}, fmt.Errorf("%s: get job %s/%s: %w", Type, cfg.namespace, job.Name, gerr)
			}
			if owner := got.Annotations[JobIDAnnotation]; owner != d.Job.ID {
				return a.Invalid(fmt.Errorf("job %s/%s exists and belongs to job %q", cfg.namespace, job.Name, owner))
			}
		case apierrors.IsNotFound(err):
			return a.Invalid(release.Invalid("job_agent_config.namespace", "the cluster has no namespace "+cfg.namespace))
		case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
			return a.Invalid(fmt.Errorf("create job %s/%s: %w", cfg.namespace, job.Name, err))
		default:
			return jobfollow.Started{}, fmt.Errorf("%s: create job %s/%s: %w", Type, cfg.namespace, job.Name, err)
		}
		a.Remember(d.Job.ID, cfg)
		ns, name := cfg.namespace, job.Name
		return jobfollow.Started{
			Result: ports.JobDispatchResult{ExternalID: ns + "/" + name, Status: release.JobInProgress, Message: "job " + ns + "/" + name + " created"},
			Poll: func(ctx context.Context) (jobfollow.State, error) {
				return poll(ctx, cs, ns, name, d.Job.ID, cfg.ttlSet)
			},
			Watch: func(ctx context.Context, changed chan<- struct{}) { a.watch(ctx, cs, ns, name, changed) },
		}, nil
	}
}

// buildJob is the Job of dispatch d under cfg.
func buildJob(d ports.JobDispatch, cfg config) *batchv1.Job {
	name := JobName(d.Job.ID)
	ours := map[string]string{KeyLabel: name, kube.ManagedByLabel: kube.ManagedBy}
	labels := kube.Merge(cfg.labels, ours)
	annotations := kube.Merge(cfg.annotations, map[string]string{JobIDAnnotation: d.Job.ID, AgentIDAnnotation: d.Agent.ID})
	if d.Release.ID != "" {
		annotations[ReleaseIDAnnotation] = d.Release.ID
	}
	tpl := *cfg.template.DeepCopy()
	tpl.Labels = kube.Merge(kube.Merge(tpl.Labels, cfg.labels), ours)
	tpl.Annotations = kube.Merge(kube.Merge(tpl.Annotations, cfg.annotations), map[string]string{JobIDAnnotation: d.Job.ID})
	if tpl.Spec.RestartPolicy == "" {
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if cfg.serviceAccountName != "" {
		tpl.Spec.ServiceAccountName = cfg.serviceAccountName
	}
	if len(tpl.Spec.Containers) == 0 {
		tpl.Spec.Containers = []corev1.Container{{Name: ContainerName}}
	}
	c := &tpl.Spec.Containers[0]
	if cfg.image != "" {
		c.Image = cfg.image
	}
	if cfg.command != nil {
		c.Command = cfg.command
	}
	if cfg.args != nil {
		c.Args = cfg.args
	}
	kube.SetEnv(c, variableEnv(d.Release.Variables))
	kube.SetEnv(c, cfg.env)
	kube.SetEnv(c, map[string]string{"RECONCILER_JOB_ID": d.Job.ID})
	backoff := cfg.backoffLimit
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cfg.namespace, Labels: labels, Annotations: annotations},
		Spec:       batchv1.JobSpec{BackoffLimit: &backoff, Template: tpl},
	}
	if cfg.activeDeadline > 0 {
		s := int64(cfg.activeDeadline / time.Second)
		job.Spec.ActiveDeadlineSeconds = &s
	}
	if cfg.ttlSet {
		s := int32(cfg.ttlAfterFinished / time.Second)
		job.Spec.TTLSecondsAfterFinished = &s
	}
	return job
}

// poll reads the Job and maps its conditions. A Job that is gone was
// deleted: cancelled, unless the config set ttlAfterFinished (ttl), when
// Kubernetes may have deleted it after it ended (a follower resumed late
// finds it gone): its outcome is then unknown, externalRunNotFound.
func poll(ctx context.Context, cs kubernetes.Interface, ns, name, jobID string, ttl bool) (jobfollow.State, error) {
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if ttl {
			return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "job " + ns + "/" + name +
				" is gone: deleted, or removed by its ttlAfterFinished after it ended; its outcome is unknown"}, nil
		}
		return jobfollow.State{Status: release.JobCancelled, Message: "job " + ns + "/" + name + " was deleted"}, nil
	}
	if err != nil {
		return jobfollow.State{}, fmt.Errorf("%s: get job %s/%s: %w", Type, ns, name, err)
	}
	if owner := j.Annotations[JobIDAnnotation]; owner != jobID {
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "job " + ns + "/" + name + " belongs to job " + owner}, nil
	}
	out := map[string]any{"job": name, "namespace": ns, "active": int(j.Status.Active), "succeeded": int(j.Status.Succeeded), "failed": int(j.Status.Failed)}
	if j.DeletionTimestamp != nil {
		return jobfollow.State{Status: release.JobCancelled, Message: "job " + ns + "/" + name + " is being deleted", Outputs: out}, nil
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return jobfollow.State{Status: release.JobSuccessful, Message: "job " + ns + "/" + name + " completed", Outputs: out}, nil
		case batchv1.JobFailed:
			msg := strings.TrimSpace(fmt.Sprintf("job %s/%s failed: %s %s", ns, name, c.Reason, c.Message))
			reason, err := podReason(ctx, cs, ns, name)
			if err != nil {
				return jobfollow.State{}, err
			}
			if reason != "" {
				msg += "; " + reason
				out["reason"] = reason
			}
			return jobfollow.State{Status: release.JobFailure, Message: msg, Outputs: out}, nil
		}
	}
	return jobfollow.State{Status: release.JobInProgress, Outputs: out,
		Message: fmt.Sprintf("job %s/%s: %d active, %d failed", ns, name, j.Status.Active, j.Status.Failed)}, nil
}

// podReason says why the Job's last failed pod failed ("" when none says).
func podReason(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: JobNameLabel + "=" + name})
	if err != nil {
		return "", fmt.Errorf("%s: list pods of job %s/%s: %w", Type, ns, name, err)
	}
	var last *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodFailed && kube.PodReason(p) == "" {
			continue
		}
		if last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp) ||
			(last.CreationTimestamp.Equal(&p.CreationTimestamp) && last.Name < p.Name) {
			last = p
		}
	}
	if last == nil {
		return "", nil
	}
	reason := kube.PodReason(last)
	if reason == "" {
		reason = "failed"
	}
	return "pod " + last.Name + ": " + reason, nil
}

// watch signals changed on every event of the Job until ctx ends,
// re-opening the watch when the server closes it.
func (a *Agent) watch(ctx context.Context, cs kubernetes.Interface, ns, name string, changed chan<- struct{}) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for ctx.Err() == nil {
		w, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err == nil {
			signal() // what changed while no watch was open
			follow(ctx, w, func(ev watch.Event) {
				if j, ok := ev.Object.(*batchv1.Job); !ok || j.Name == name {
					signal()
				}
			})
		}
		t := time.NewTimer(a.retry)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// follow hands w's events to on until ctx ends or the server closes the
// watch, then stops it.
func follow(ctx context.Context, w watch.Interface, on func(watch.Event)) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			on(ev)
		}
	}
}

// CancelJob deletes the job's Job with propagation Background (its pods
// go after it); a Job that is gone, or a job this agent cannot place, is
// left alone. The cluster is the dispatch's, or, for a job dispatched
// before a restart, the agent record's config.
func (a *Agent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	ns, name, ok := strings.Cut(c.ExternalID, "/")
	if !ok || name != JobName(c.JobID) {
		return nil // not a Job this agent created for this job
	}
	cfg, ok := a.ConfigOf(c.JobID)
	if !ok {
		var err error
		if cfg, err = parseClusterOnly(c.Agent.Config); err != nil {
			return fmt.Errorf("%s: cancel job %s: %w", Type, c.ExternalID, err)
		}
	}
	cs, err := a.client(ctx, cfg.cluster)
	if err != nil {
		return fmt.Errorf("%s: cancel job %s: %w", Type, c.ExternalID, err)
	}
	bg := metav1.DeletePropagationBackground
	err = cs.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: delete job %s: %w", Type, c.ExternalID, err)
	}
	return nil
}
