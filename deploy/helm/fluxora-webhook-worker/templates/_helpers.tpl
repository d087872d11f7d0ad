{{/* The release's base name, at most 63 characters. */}}
{{- define "fww.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fww.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels; call with (dict "ctx" $ "component" "worker"). */}}
{{- define "fww.selector" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "fww.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The shutdown timeout in whole seconds, rounded up; 30 s is the worker's default. */}}
{{- define "fww.terminationGrace" -}}
{{- $ms := int64 (.Values.config.WEBHOOK_SHUTDOWN_TIMEOUT_MS | default 30000) -}}
{{- add (div (add $ms 999) 1000) (int64 .Values.terminationGraceExtraSeconds) -}}
{{- end -}}

{{- define "fww.secretRef" -}}
valueFrom:
  secretKeyRef:
    name: {{ .secretName | quote }}
    key: {{ .key | quote }}
{{- end -}}

{{/*
The environment of every command: the connection strings, the endpoint's
secrets, the files and the plain settings. Empty settings are left out, so
the worker applies its own defaults.
*/}}
{{- define "fww.env" -}}
- name: DATABASE_URL
  {{- include "fww.secretRef" (required "database.secretName is required: the Secret holding DATABASE_URL" .Values.database.secretName | dict "key" .Values.database.key "secretName") | nindent 2 }}
{{- with .Values.listenDatabase }}{{ if .secretName }}
- name: WEBHOOK_LISTEN_DATABASE_URL
  {{- include "fww.secretRef" . | nindent 2 }}
{{- end }}{{ end }}
{{- with .Values.redis }}{{ if .secretName }}
- name: REDIS_URL
  {{- include "fww.secretRef" . | nindent 2 }}
{{- end }}{{ end }}
{{- with .Values.defaultEndpoint }}
{{- if .url }}
- name: WEBHOOK_URL
  value: {{ .url | quote }}
{{- end }}
{{- if .secretName }}
- name: WEBHOOK_SECRET
  {{- include "fww.secretRef" . | nindent 2 }}
{{- if .previousKey }}
- name: WEBHOOK_SECRET_PREVIOUS
  {{- include "fww.secretRef" (dict "secretName" .secretName "key" .previousKey) | nindent 2 }}
{{- end }}
{{- end }}
{{- if .previousUntil }}
- name: WEBHOOK_SECRET_PREVIOUS_UNTIL
  value: {{ .previousUntil | quote }}
{{- end }}
{{- end }}
{{- with .Values.egressProxy }}{{ if .secretName }}
- name: WEBHOOK_EGRESS_PROXY
  {{- include "fww.secretRef" . | nindent 2 }}
{{- end }}{{ end }}
{{- if .Values.secretsKey.secretName }}
- name: WEBHOOK_SECRETS_KEY_FILE
  value: /etc/fluxora/keys/{{ .Values.secretsKey.key }}
{{- end }}
{{- if .Values.caBundle.configMapName }}
- name: WEBHOOK_CA_FILE
  value: /etc/fluxora/ca/{{ .Values.caBundle.key }}
{{- end }}
- name: WEBHOOK_METRICS_ADDR
  value: {{ printf ":%v" .Values.metrics.port | quote }}
{{- range $name, $value := .Values.config }}
{{- if ne (toString $value) "" }}
- name: {{ $name }}
  value: {{ toString $value | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The volumes of the key file and the CA bundle. */}}
{{- define "fww.volumes" -}}
{{- if .Values.secretsKey.secretName }}
- name: secrets-key
  secret:
    secretName: {{ .Values.secretsKey.secretName | quote }}
    defaultMode: 0400
    items:
      - key: {{ .Values.secretsKey.key | quote }}
        path: {{ .Values.secretsKey.key | quote }}
{{- end }}
{{- if .Values.caBundle.configMapName }}
- name: ca-bundle
  configMap:
    name: {{ .Values.caBundle.configMapName | quote }}
    items:
      - key: {{ .Values.caBundle.key | quote }}
        path: {{ .Values.caBundle.key | quote }}
{{- end }}
{{- end -}}

{{- define "fww.volumeMounts" -}}
{{- if .Values.secretsKey.secretName }}
- name: secrets-key
  mountPath: /etc/fluxora/keys
  readOnly: true
{{- end }}
{{- if .Values.caBundle.configMapName }}
- name: ca-bundle
  mountPath: /etc/fluxora/ca
  readOnly: true
{{- end }}
{{- end -}}

{{/* What every pod of the chart shares: scheduling and security. */}}
{{- define "fww.podCommon" -}}
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . | quote }}
{{- end }}
automountServiceAccountToken: false
enableServiceLinks: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
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
