{{/* Names and labels. */}}
{{- define "toktier.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toktier.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toktier.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toktier.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "toktier.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "toktier.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{/* The image, with the CUDA suffix for the GPU variant. */}}
{{- define "toktier.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.gpu.enabled }}{{ $tag = printf "%s%s" $tag .Values.gpu.imageTagSuffix }}{{ end }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}

{{/* Drain timeout in whole seconds, rounded up. */}}
{{- define "toktier.drainSeconds" -}}
{{- $ms := int64 .Values.config.limits.drain_timeout_ms }}
{{- div (add $ms 999) 1000 }}
{{- end }}

{{/* terminationGracePeriodSeconds: longer than preStop + drain, checked. */}}
{{- define "toktier.terminationGrace" -}}
{{- $floor := add (include "toktier.drainSeconds" . | int64) (int64 .Values.lifecycle.preStopSleepSeconds) }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $floor 15 }}
{{- else }}
{{- $g := int64 .Values.terminationGracePeriodSeconds }}
{{- if le $g $floor }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed the preStop sleep plus config.limits.drain_timeout_ms (%d s), else in-flight requests are killed" $g $floor) }}
{{- end }}
{{- $g }}
{{- end }}
{{- end }}

{{/* Checks that the rendered configuration fits the mode. */}}
{{- define "toktier.validate" -}}
{{- if not (has .Values.mode (list "gateway" "sidecar")) }}
{{- fail (printf "mode must be gateway or sidecar, not %q" .Values.mode) }}
{{- end }}
{{- if eq .Values.mode "sidecar" }}
{{- range .Values.config.backends }}
{{- if not (or (hasPrefix "http://127.0.0.1:" .) (hasPrefix "http://localhost:" .)) }}
{{- fail (printf "sidecar mode: config.backends must be the engine on localhost, not %s" .) }}
{{- end }}
{{- end }}
{{- if eq (int .Values.sidecar.engine.port) (int .Values.config.port) }}
{{- fail "sidecar mode: the engine port and config.port must differ" }}
{{- end }}
{{- end }}
{{- if not (has (lower .Values.routing.sessionHeader) .Values.config.session_headers) }}
{{- fail (printf "routing.sessionHeader %q is not one of config.session_headers" .Values.routing.sessionHeader) }}
{{- end }}
{{- range .Values.routing.hashHeaders }}
{{- if not (has (lower .) $.Values.config.session_headers) }}
{{- fail (printf "routing.hashHeaders: %q is not one of config.session_headers" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The headers the balancer hashes, lower case, one per line:
     routing.hashHeaders, or every header toktier reads a session from
     (Claude Code's, Codex's, OpenCode's, ...). A client sends one of them,
     so hashing all of them keys each client by the one it sends. */}}
{{- define "toktier.hashHeaders" -}}
{{- $names := .Values.routing.hashHeaders | default .Values.config.session_headers }}
{{- range $names }}
{{ lower . }}
{{- end }}
{{- end }}

{{/* The nginx hash key: the variables of the hashed headers concatenated
     ($http_x_session_id$http_x_claude_code_session_id...). nginx names
     session-id and session_id alike, so each variable appears once. */}}
{{- define "toktier.nginxHashKey" -}}
{{- $vars := list }}
{{- range splitList "\n" (include "toktier.hashHeaders" . | trim) }}
{{- $vars = append $vars (printf "$http_%s" (replace "-" "_" .)) }}
{{- end }}
{{- join "" (uniq $vars) }}
{{- end }}

{{/* toktier's container. Also the sidecar added to an engine's pod template. */}}
{{- define "toktier.sidecar.container" -}}
- name: toktier
  image: {{ include "toktier.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["serve", "--config", "/etc/toktier/config.json"]
  workingDir: {{ .Values.persistence.mountPath }}
  ports:
    - name: http
      containerPort: {{ .Values.config.port }}
      protocol: TCP
  startupProbe:
    httpGet: {path: /healthz, port: http}
    periodSeconds: {{ .Values.probes.startup.periodSeconds }}
    timeoutSeconds: {{ .Values.probes.startup.timeoutSeconds }}
    failureThreshold: {{ .Values.probes.startup.failureThreshold }}
  livenessProbe:
    httpGet: {path: /healthz, port: http}
    periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
    timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
    failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
  readinessProbe:
    httpGet: {path: /readyz, port: http}
    periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
    timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
    failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
  lifecycle:
    preStop:
      exec:
        command: ["sleep", "{{ .Values.lifecycle.preStopSleepSeconds }}"]
  {{- $res := deepCopy .Values.resources }}
  {{- if and .Values.gpu.enabled (eq .Values.mode "gateway") }}
  {{- $limits := default (dict) $res.limits }}
  {{- $_ := set $limits "nvidia.com/gpu" .Values.gpu.count }}
  {{- $_ := set $res "limits" $limits }}
  {{- end }}
  resources:
    {{- toYaml $res | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/toktier
      readOnly: true
    - name: data
      mountPath: {{ .Values.persistence.mountPath }}
    - name: tokenizers
      mountPath: {{ .Values.tokenizers.mountPath }}
      readOnly: true
    - name: tmp
      mountPath: /tmp
{{- end }}

{{/* Init containers (tokenizer files from an image). */}}
{{- define "toktier.sidecar.initContainers" -}}
{{- if eq .Values.tokenizers.source "initContainer" }}
- name: tokenizers
  image: {{ .Values.tokenizers.initContainer.image | quote }}
  imagePullPolicy: {{ .Values.tokenizers.initContainer.pullPolicy }}
  command: {{ toJson .Values.tokenizers.initContainer.command }}
  resources:
    {{- toYaml .Values.tokenizers.initContainer.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: tokenizers
      mountPath: /models-out
{{- end }}
{{- end }}

{{/* Pod volumes of toktier; `data` comes from a claim template in gateway mode with persistence. */}}
{{- define "toktier.sidecar.volumes" -}}
- name: config
  configMap:
    name: {{ include "toktier.fullname" . }}-config
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if eq .Values.tokenizers.source "initContainer" }}
- name: tokenizers
  emptyDir:
    sizeLimit: {{ .Values.tokenizers.sizeLimit }}
{{- else if eq .Values.tokenizers.source "volume" }}
- name: tokenizers
  {{- toYaml .Values.tokenizers.volume | nindent 2 }}
{{- else }}
{{- fail (printf "tokenizers.source must be volume or initContainer, not %q" .Values.tokenizers.source) }}
{{- end }}
{{- if not (and (eq .Values.mode "gateway") .Values.persistence.enabled) }}
- name: data
  emptyDir:
    sizeLimit: {{ .Values.persistence.emptyDirSizeLimit }}
{{- end }}
{{- end }}

{{/* Scheduling fields shared by both workloads. */}}
{{- define "toktier.scheduling" -}}
{{- $ns := deepCopy .Values.nodeSelector }}
{{- $tol := .Values.tolerations }}
{{- if .Values.gpu.enabled }}
{{- $ns = merge $ns .Values.gpu.nodeSelector }}
{{- $tol = concat $tol .Values.gpu.tolerations }}
{{- end }}
{{- with $ns }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $tol }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range . }}
  - {{- toYaml . | nindent 4 }}
    labelSelector:
      matchLabels:
        {{- include "toktier.selectorLabels" $ | nindent 8 }}
  {{- end }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
