{{/*
The chart name, overridable.
*/}}
{{- define "toolgraph.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's resources: release-chart, unless the release name already holds the chart name.
*/}}
{{- define "toolgraph.fullname" -}}
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

{{/*
chart-version, for the helm.sh/chart label.
*/}}
{{- define "toolgraph.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels every resource carries.
*/}}
{{- define "toolgraph.labels" -}}
helm.sh/chart: {{ include "toolgraph.chart" . }}
{{ include "toolgraph.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolgraph
{{- end }}

{{/*
Labels that select the proxy pods.
*/}}
{{- define "toolgraph.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgraph.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: proxy
{{- end }}

{{/*
Labels of a bundled store; call with (dict "ctx" $ "store" "redis").
*/}}
{{- define "toolgraph.storeLabels" -}}
helm.sh/chart: {{ include "toolgraph.chart" .ctx }}
{{ include "toolgraph.storeSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: toolgraph
{{- end }}

{{- define "toolgraph.storeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgraph.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .store }}
{{- end }}

{{/*
The name of a bundled store's resources; call with (dict "ctx" $ "store" "redis").
*/}}
{{- define "toolgraph.storeName" -}}
{{- printf "%s-%s" (include "toolgraph.fullname" .ctx | trunc 56 | trimSuffix "-") .store }}
{{- end }}

{{/*
The ServiceAccount the pods run as.
*/}}
{{- define "toolgraph.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolgraph.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image reference: digest wins, else the tag, else appVersion with the variant suffix.
*/}}
{{- define "toolgraph.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- $variant := ternary "gpu" "cpu" .Values.gpu.enabled }}
{{- $tag := default (printf "%s-%s" .Chart.AppVersion $variant) .Values.image.tag }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
The Secret loaded as environment variables, or nothing.
*/}}
{{- define "toolgraph.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else if .Values.secret.create }}
{{- include "toolgraph.fullname" . }}
{{- end }}
{{- end }}

{{/*
Each store's URL: the external one, the bundled Service, or empty (embedded default).
A store set both ways is refused.
*/}}
{{- define "toolgraph.redisUrl" -}}
{{- $s := .Values.stores.redis }}
{{- if and $s.url $s.bundled.enabled }}
{{- fail "stores.redis: set url or bundled.enabled, not both" }}
{{- end }}
{{- if $s.bundled.enabled }}
{{- printf "redis://%s:6379/0" (include "toolgraph.storeName" (dict "ctx" . "store" "redis")) }}
{{- else }}
{{- $s.url }}
{{- end }}
{{- end }}

{{- define "toolgraph.qdrantUrl" -}}
{{- $s := .Values.stores.qdrant }}
{{- if and $s.url $s.bundled.enabled }}
{{- fail "stores.qdrant: set url or bundled.enabled, not both" }}
{{- end }}
{{- if $s.bundled.enabled }}
{{- printf "http://%s:6333" (include "toolgraph.storeName" (dict "ctx" . "store" "qdrant")) }}
{{- else }}
{{- $s.url }}
{{- end }}
{{- end }}

{{- define "toolgraph.neo4jUri" -}}
{{- $s := .Values.stores.neo4j }}
{{- if and $s.uri $s.bundled.enabled }}
{{- fail "stores.neo4j: set uri or bundled.enabled, not both" }}
{{- end }}
{{- if $s.bundled.enabled }}
{{- printf "bolt://%s:7687" (include "toolgraph.storeName" (dict "ctx" . "store" "neo4j")) }}
{{- else }}
{{- $s.uri }}
{{- end }}
{{- end }}
