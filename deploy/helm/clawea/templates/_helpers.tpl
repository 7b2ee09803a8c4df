{{/* Chart name, at most 63 characters. */}}
{{- define "clawea.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name; component suffixes are added by the callers, so keep room. */}}
{{- define "clawea.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "clawea.attester.fullname" -}}{{ include "clawea.fullname" . }}-attester{{- end -}}
{{- define "clawea.verifier.fullname" -}}{{ include "clawea.fullname" . }}-verifier{{- end -}}

{{- define "clawea.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "clawea.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component: call with (dict "root" $ "component" "attester"). */}}
{{- define "clawea.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clawea.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference: call with (dict "image" .Values.x.image "root" $). */}}
{{- define "clawea.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The hardened container security context (all capabilities dropped, then the list added). */}}
{{- define "clawea.containerSecurityContext" -}}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
  {{- with .add }}
  add: {{ toJson . }}
  {{- end }}
{{- end -}}

{{/* Socket path inside the control volume. */}}
{{- define "clawea.attester.controlSocket" -}}
{{- printf "%s/control/attester.sock" (trimSuffix "/" .Values.attester.controlSocket.mountPath) -}}
{{- end -}}

{{/* The attester configuration: the user's config with the keys the chart owns. */}}
{{- define "clawea.attester.config" -}}
{{- $cfg := deepCopy .Values.attester.config -}}
{{- $a := deepCopy (default (dict) (get $cfg "attester")) -}}
{{- range $k := list "listen" "metricsListen" "controlSocket" "controlUids" "stateDir" "platform" }}
{{- if hasKey $a $k }}
{{- fail (printf "attester.config.attester.%s is set by the chart; remove it from values" $k) }}
{{- end }}
{{- end }}
{{- if not (get $a "trustedTemplates") }}
{{- fail "attester.config.attester.trustedTemplates is required: the template hashes this attester accepts (file name -> sha256:<hex>)" }}
{{- end }}
{{- if or (not (get $a "modelProvider")) (not (get $a "model")) }}
{{- fail "attester.config.attester.modelProvider and attester.config.attester.model are required: the model identity the attestations commit to" }}
{{- end }}
{{- $_ := set $a "listen" (printf "0.0.0.0:%d" (int .Values.attester.port)) -}}
{{- $_ := set $a "metricsListen" (printf "0.0.0.0:%d" (int .Values.attester.metricsPort)) -}}
{{- $_ := set $a "controlSocket" (include "clawea.attester.controlSocket" .) -}}
{{- if .Values.attester.agent.enabled }}
{{- $_ := set $a "controlUids" (list (int .Values.attester.agent.runAsUser)) -}}
{{- end }}
{{- $_ := set $a "stateDir" "/var/lib/clawea" -}}
{{- $_ := set $a "platform" .Values.attester.platform -}}
{{- $_ := set $cfg "attester" $a -}}
{{- toPrettyJson $cfg -}}
{{- end -}}

{{/* The DaemonSet's affinity: the user's, with a required node affinity to the
confidential nodes of the platform unless the user set nodeAffinity. */}}
{{- define "clawea.attester.affinity" -}}
{{- $a := .Values.attester -}}
{{- $aff := deepCopy (default (dict) $a.affinity) -}}
{{- if not (hasKey $aff "nodeAffinity") -}}
{{- $platforms := ternary (list "sev-snp" "tdx" "tpm") (list $a.platform) (eq $a.platform "auto") -}}
{{- $terms := list -}}
{{- range $p := $platforms -}}
{{- $labels := get $a.platformNodeLabels $p -}}
{{- if $labels -}}
{{- $exprs := list -}}
{{- range $k := keys $labels | sortAlpha -}}
{{- $exprs = append $exprs (dict "key" $k "operator" "In" "values" (list (get $labels $k))) -}}
{{- end -}}
{{- $terms = append $terms (dict "matchExpressions" $exprs) -}}
{{- end -}}
{{- end -}}
{{- if not $terms -}}
{{- fail (printf "attester.platformNodeLabels has no labels for platform %s: the DaemonSet would land on every node" $a.platform) -}}
{{- end -}}
{{- $_ := set $aff "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" $terms)) -}}
{{- end -}}
{{- toYaml $aff -}}
{{- end -}}
