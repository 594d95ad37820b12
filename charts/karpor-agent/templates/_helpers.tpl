{{/* The release's full name, at most 63 characters. */}}
{{- define "karpor-agent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "karpor-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "karpor-agent.labels" -}}
{{ include "karpor-agent.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "karpor-agent.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The Secret holding the join token, and its key. */}}
{{- define "karpor-agent.tokenSecret" -}}
{{- default (printf "%s-join" (include "karpor-agent.fullname" .)) .Values.joinToken.existingSecret -}}
{{- end -}}

{{/* Values the agent cannot work without, each refused with what to set. */}}
{{- define "karpor-agent.validate" -}}
{{- if not .Values.hub.address -}}
{{- fail "hub.address is required: the hub's agent listener (https://HOST:PORT), as `karpor cluster add NAME --mode agent` prints it" -}}
{{- end -}}
{{- if not (hasPrefix "https://" .Values.hub.address) -}}
{{- fail (printf "hub.address %q: the agent reaches the hub over https:// only" .Values.hub.address) -}}
{{- end -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.hub.pin) -}}
{{- fail "hub.pin is required: sha256:HEX, the pin the install line prints" -}}
{{- end -}}
{{- if and (not .Values.joinToken.value) (not .Values.joinToken.existingSecret) -}}
{{- fail "joinToken.value or joinToken.existingSecret is required: the install line's KARPOR_AGENT__TOKEN" -}}
{{- end -}}
{{- range (concat .Values.rbac.rules .Values.rbac.extraRules) -}}
{{- range .verbs -}}
{{- if not (has . (list "get" "list" "watch")) -}}
{{- fail (printf "rbac: the verb %q writes or is not a read: the agent reads only (get, list, watch)" .) -}}
{{- end -}}
{{- end -}}
{{- range .resources -}}
{{- if or (eq . "*") (and (contains "/" .) (ne . "pods/log")) -}}
{{- fail (printf "rbac: the resource %q is a wildcard or a subresource: the agent reads objects and pods/log only" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The agent's config file. */}}
{{- define "karpor-agent.config" -}}
log:
  format: {{ .Values.log.format }}
  level: {{ .Values.log.level }}
agent:
  hub: {{ .Values.hub.address | quote }}
  pin: {{ .Values.hub.pin | quote }}
  token: {file: /etc/karpor-agent/join/token}
  state_file: /var/lib/karpor-agent/agent-state.json
  probe_listen: "0.0.0.0:7445"
  plan_interval: {{ .Values.planInterval }}
  request_timeout: {{ .Values.requestTimeout }}
{{- end -}}
