package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/adapters/kubernetes"
	"github.com/reconcilerhq/reconciler/adapters/process"
	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// kubeOptions configure the kubernetes agent runtime (--runtime kubernetes).
type kubeOptions struct {
	namespace, image, podTemplate string
	kubeconfigRef, context        string
}

// kubeFlags binds the kubernetes runtime's flags.
func kubeFlags(f *pflag.FlagSet, o *kubeOptions) {
	f.StringVar(&o.namespace, "kube-namespace", "", "namespace of the agents' pods (--runtime kubernetes; required)")
	f.StringVar(&o.image, "kube-image", "", "image of the agents' container (--runtime kubernetes; or the pod template's)")
	f.StringVar(&o.podTemplate, "kube-pod-template", "", "YAML file of the pod template (metadata, spec) every agent pod starts from")
	f.StringVar(&o.kubeconfigRef, "kube-kubeconfig-ref", "", "secret reference (env:NAME or file:/path) of the kubeconfig; empty: the in-cluster config")
	f.StringVar(&o.context, "kube-context", "", "kubeconfig context (default: its current one)")
}

// newKubeRuntime builds and starts the kubernetes agent runtime: its
// command, args and plain environment are the --agent-* flags'.
func newKubeRuntime(ctx context.Context, o agentOptions, store ports.RunStore, q ports.Queue, secrets ports.SecretResolver, clock ports.Clock,
	log *slog.Logger, exit func(context.Context, reconcile.RunRef, string, *ports.RunObserveParams)) (*kubernetes.Runtime, error) {
	if len(o.secrets) > 0 {
		return nil, usagef("--agent-secret: the kubernetes runtime puts no secret in a pod's spec; reference a Kubernetes Secret in --kube-pod-template")
	}
	pc, err := o.config()
	if err != nil {
		return nil, err
	}
	cfg := kubernetes.Config{Namespace: o.kube.namespace, Image: o.kube.image, Args: o.args, Env: pc.Env,
		StopGrace: o.stopGrace, Heartbeat: o.heartbeat}
	if o.command != "" {
		cfg.Command = []string{o.command}
	}
	if o.kube.podTemplate != "" {
		raw, err := readInput(os.Stdin, o.kube.podTemplate)
		if err != nil {
			return nil, usagef("--kube-pod-template: %v", err)
		}
		var tpl corev1.PodTemplateSpec
		if err := yaml.UnmarshalStrict(raw, &tpl); err != nil {
			return nil, usagef("--kube-pod-template %s: %v", o.kube.podTemplate, err)
		}
		cfg.Template = tpl
	}
	if err := cfg.Validate(); err != nil {
		return nil, usagef("--kube-namespace/--kube-image/--kube-pod-template: %v", err)
	}
	conn := &kube.Connector{Secrets: secrets, Field: "serve"}
	client, err := conn.Client(ctx, kube.Cluster{KubeconfigRef: o.kube.kubeconfigRef, Context: o.kube.context})
	if err != nil {
		return nil, usagef("--kube-kubeconfig-ref/--kube-context: %v", err)
	}
	rt, err := kubernetes.New(cfg, kubernetes.Options{Client: client, Store: store, Clock: clock, Wake: wake(q, clock),
		Branch: process.Branch, Exit: exit, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("agent runtime: %w", err)
	}
	start, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := rt.Start(start); err != nil {
		rt.Close()
		return nil, err
	}
	return rt, nil
}
