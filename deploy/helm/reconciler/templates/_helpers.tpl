{{/* The release's resource name. */}}
{{- define "reconciler.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of the release's pods of every component. */}}
{{- define "reconciler.baseLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels that select the release's serve pods (never the migration's). */}}
{{- define "reconciler.selectorLabels" -}}
{{ include "reconciler.baseLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{/* Labels of every resource. */}}
{{- define "reconciler.labels" -}}
{{ include "reconciler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image reference. */}}
{{- define "reconciler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The DSN variable, from the database Secret. */}}
{{- define "reconciler.dsnEnv" -}}
- name: RECONCILER_DSN
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret: name the Secret holding the PostgreSQL DSN" .Values.database.existingSecret }}
      key: {{ .Values.database.dsnKey }}
{{- end -}}

{{/* serve's environment: the DSN, the secrets, the log format, env. */}}
{{- define "reconciler.env" -}}
{{ include "reconciler.dsnEnv" . }}
- name: RECONCILER_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
{{- range .Values.secretEnv }}
- name: {{ required "secretEnv[].name" .name }}
  valueFrom:
    secretKeyRef:
      name: {{ required "secretEnv[].secretName" .secretName }}
      key: {{ required "secretEnv[].key" .key }}
{{- end }}
{{- if .Values.kubernetes.runtime.enabled }}
- name: RECONCILER_RUNTIME
  value: kubernetes
- name: RECONCILER_KUBE_NAMESPACE
  value: {{ include "reconciler.kubeNamespace" . | quote }}
{{- with .Values.kubernetes.runtime.image }}
- name: RECONCILER_KUBE_IMAGE
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Whether serve needs in-cluster credentials. */}}
{{- define "reconciler.kubeAccess" -}}
{{- if or .Values.kubernetes.runtime.enabled .Values.kubernetes.jobAgent.enabled -}}true{{- end -}}
{{- end -}}

{{/* The namespace the Kubernetes parts work in. */}}
{{- define "reconciler.kubeNamespace" -}}
{{ .Values.kubernetes.namespace | default .Release.Namespace }}
{{- end -}}

{{/* serve's account: the chart's ServiceAccount with its token when a
Kubernetes part is enabled, no token otherwise. */}}
{{- define "reconciler.serverAccount" -}}
{{- if include "reconciler.kubeAccess" . }}
serviceAccountName: {{ include "reconciler.fullname" . }}
automountServiceAccountToken: true
{{- else }}
automountServiceAccountToken: false
{{- end }}
{{- end -}}

{{/* The pod's security context and scheduling. */}}
{{- define "reconciler.podSpec" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
