{{/* The name of every object of the release. */}}
{{- define "crd-apiserver.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "crd-apiserver.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "crd-apiserver.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "crd-apiserver.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "crd-apiserver.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Every definition file: name -> text, from the chart's files and from values. */}}
{{- define "crd-apiserver.definitionFiles" -}}
{{- $files := dict -}}
{{- range $path, $_ := .Files.Glob .Values.definitions.filesGlob -}}
{{- $_ := set $files (base $path) ($.Files.Get $path) -}}
{{- end -}}
{{- range $name, $text := .Values.definitions.inline -}}
{{- $_ := set $files $name $text -}}
{{- end -}}
{{- toYaml $files -}}
{{- end -}}

{{/* The served group versions of the definitions, as a YAML list of "<version>.<group>". */}}
{{- define "crd-apiserver.groupVersions" -}}
{{- $gvs := list -}}
{{- range $name, $text := (include "crd-apiserver.definitionFiles" . | fromYaml) -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $text -1 -}}
{{- $crd := fromYaml $doc -}}
{{- if and $crd (eq (default "" $crd.kind) "CustomResourceDefinition") -}}
{{- range $v := $crd.spec.versions -}}
{{- if $v.served -}}
{{- $gvs = append $gvs (printf "%s.%s" $v.name $crd.spec.group) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (uniq $gvs | sortAlpha) -}}
{{- end -}}

{{/* "true" when the server also serves CustomResourceDefinitions of the main apiserver. */}}
{{- define "crd-apiserver.clusterDefinitions" -}}
{{- if or .Values.clusterDefinitions.selector .Values.clusterDefinitions.names -}}
true
{{- end -}}
{{- end -}}

{{/*
The Service the APIService of a group version goes through: with apiService.openAPISlices, its
own Service, named by the first ten hex digits of the SHA-256 of "<group>/<version>" (the server
serves that group version's part of /openapi/v2 and aggregated /apis to a TLS server name ending
so; api::openapi::slices), else the main one. Call with (list $ $group $version).
*/}}
{{- define "crd-apiserver.apiServiceService" -}}
{{- $root := index . 0 -}}{{- $group := index . 1 -}}{{- $version := index . 2 -}}
{{- $fullname := include "crd-apiserver.fullname" $root -}}
{{- if $root.Values.apiService.openAPISlices -}}
{{- printf "%s-%s" ($fullname | trunc 52 | trimSuffix "-") (printf "%s/%s" $group $version | sha256sum | trunc 10) -}}
{{- else -}}
{{- $fullname -}}
{{- end -}}
{{- end -}}
