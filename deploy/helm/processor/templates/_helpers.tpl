{{/* The chart's name, and the objects' name: the release's unless set. */}}
{{- define "processor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "processor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "processor.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "processor.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The pods' labels and the selectors: the name and the pipeline (the
group), as the kustomize base labels them. */}}
{{- define "processor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "processor.name" . }}
app.kubernetes.io/instance: {{ required "group (PROCESSOR_GROUP) is required" .Values.group | quote }}
{{- end -}}

{{- define "processor.labels" -}}
{{ include "processor.selectorLabels" . }}
app.kubernetes.io/part-of: processor
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "processor.kafkaSecret" -}}
{{- default (printf "%s-kafka" (include "processor.fullname" .)) .Values.kafka.existingSecret -}}
{{- end -}}

{{- define "processor.oauthSecret" -}}
{{- default (printf "%s-kafka-oauth" (include "processor.fullname" .)) .Values.kafka.oauth.existingSecret -}}
{{- end -}}

{{- define "processor.tokenSecret" -}}
{{- default (printf "%s-http-token" (include "processor.fullname" .)) .Values.httpToken.existingSecret -}}
{{- end -}}

{{- define "processor.httpToken" -}}
{{- if or .Values.httpToken.existingSecret .Values.httpToken.token }}true{{ end -}}
{{- end -}}
