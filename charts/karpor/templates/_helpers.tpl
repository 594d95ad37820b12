{{/* Names and labels. */}}
{{- define "karpor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "karpor.fullname" -}}
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

{{- define "karpor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; `component` names the part (server, syncer, etcd, ...). */}}
{{- define "karpor.labels" -}}
helm.sh/chart: {{ include "karpor.chart" .root }}
{{ include "karpor.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{- define "karpor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpor.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "karpor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "karpor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Whole seconds, rounded up, of a duration value ("500ms", "5s", "1m"). */}}
{{- define "karpor.seconds" -}}
{{- $d := toString . }}
{{- if hasSuffix "ms" $d }}
{{- div (add (trimSuffix "ms" $d | atoi) 999) 1000 }}
{{- else if hasSuffix "s" $d }}
{{- trimSuffix "s" $d | atoi }}
{{- else if hasSuffix "m" $d }}
{{- mul (trimSuffix "m" $d | atoi) 60 }}
{{- else if hasSuffix "h" $d }}
{{- mul (trimSuffix "h" $d | atoi) 3600 }}
{{- else }}
{{- fail (printf "karpor: %q is not a duration (use e.g. 500ms, 5s, 1m or 1h)" $d) }}
{{- end }}
{{- end }}

{{/*
How long Kubernetes waits after asking a pod to stop: the preStop sleep, karpor's drain
delay (readiness failing, listener open), its grace period for in-flight requests, and 5 s
to close the stores. An explicit value must cover that sum.
*/}}
{{- define "karpor.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown }}
{{- $needed := add (int $s.preStopSleepSeconds) (include "karpor.seconds" $s.drainDelay | atoi) (include "karpor.seconds" $s.gracePeriod | atoi) 5 }}
{{- if kindIs "invalid" $s.terminationGracePeriodSeconds }}
{{- $needed }}
{{- else if lt (int $s.terminationGracePeriodSeconds) (int $needed) }}
{{- fail (printf "karpor: shutdown.terminationGracePeriodSeconds=%d is below shutdown.preStopSleepSeconds + drainDelay + gracePeriod + 5 s = %d: the kubelet would kill karpor while it drains" (int $s.terminationGracePeriodSeconds) (int $needed)) }}
{{- else }}
{{- $s.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
The combinations the chart refuses, each with what to do instead. Included by every
template that renders karpor, so `helm template` and `helm install` stop on them.
*/}}
{{- define "karpor.validate" -}}
{{- $v := .Values }}
{{- $sqlite := list }}
{{- if eq $v.metadata.backend "sqlite" }}{{ $sqlite = append $sqlite "metadata.backend=sqlite" }}{{ end }}
{{- if eq $v.storage.backend "sqlite" }}{{ $sqlite = append $sqlite "storage.backend=sqlite" }}{{ end }}
{{- if $sqlite }}
{{- if ne (int $v.server.replicaCount) 1 }}
{{- fail (printf "karpor: %s keeps its data in a file on one PersistentVolumeClaim that only one pod can open: set server.replicaCount=1 (it is %d), or use metadata.backend=etcd|mysql and storage.backend=elasticsearch to scale out" (join " and " $sqlite) (int $v.server.replicaCount)) }}
{{- end }}
{{- if $v.syncer.separate }}
{{- fail (printf "karpor: %s keeps its data in a file only the server pod can open, so a separate syncer pod cannot reach it: set syncer.separate=false (the syncer then runs inside the server)" (join " and " $sqlite)) }}
{{- end }}
{{- end }}
{{- if and (not $v.syncer.separate) (gt (int $v.server.replicaCount) 1) }}
{{- fail (printf "karpor: syncer.separate=false runs a syncer inside every server replica; with server.replicaCount=%d they would all sync the same clusters: set syncer.separate=true" (int $v.server.replicaCount)) }}
{{- end }}
{{- if and (gt (int $v.syncer.replicas) 1) (not $v.syncer.separate) }}
{{- fail (printf "karpor: syncer.replicas=%d counts pods of the separate syncer; syncer.separate=false runs the syncer inside the one server: set syncer.separate=true" (int $v.syncer.replicas)) }}
{{- end }}
{{- if and $v.readiness.includeSyncer (not $v.syncer.separate) }}
{{- fail "karpor: readiness.includeSyncer=true needs syncer.separate=true (an in-process syncer is already the server's Syncer check)" }}
{{- end }}
{{- if and (eq $v.metadata.backend "etcd") (not $v.metadata.etcd.bundled) (not $v.metadata.etcd.endpoints) }}
{{- fail "karpor: metadata.backend=etcd with metadata.etcd.bundled=false needs metadata.etcd.endpoints (the URLs of your etcd)" }}
{{- end }}
{{- if and (eq $v.metadata.backend "mysql") (not $v.metadata.mysql.url.value) (not $v.metadata.mysql.url.existingSecret) }}
{{- fail "karpor: metadata.backend=mysql needs the URL from a Secret: set metadata.mysql.url.existingSecret (and .key), or metadata.mysql.url.value" }}
{{- end }}
{{- if and (eq $v.storage.backend "elasticsearch") (not $v.storage.elasticsearch.bundled) (not $v.storage.elasticsearch.url) }}
{{- fail "karpor: storage.backend=elasticsearch with storage.elasticsearch.bundled=false needs storage.elasticsearch.url" }}
{{- end }}
{{- if and $v.server.tls.enabled (not $v.server.tls.secretName) }}
{{- fail "karpor: server.tls.enabled=true needs server.tls.secretName (a kubernetes.io/tls Secret)" }}
{{- end }}
{{- if and $v.metadata.etcd.tls.enabled (not $v.metadata.etcd.tls.secretName) }}
{{- fail "karpor: metadata.etcd.tls.enabled=true needs metadata.etcd.tls.secretName" }}
{{- end }}
{{- $_ := include "karpor.terminationGracePeriodSeconds" . }}
{{- $names := list }}
{{- range $i, $t := $v.auth.tokens }}
{{- if not (or $t.value $t.existingSecret) }}
{{- fail (printf "karpor: auth.tokens[%d] (%s) needs its token: value, or existingSecret and key" $i $t.name) }}
{{- end }}
{{- if and $t.existingSecret (not $t.key) }}
{{- fail (printf "karpor: auth.tokens[%d] (%s) names existingSecret %s but no key in it" $i $t.name $t.existingSecret) }}
{{- end }}
{{- if has $t.name $names }}
{{- fail (printf "karpor: auth.tokens[%d]: the name %s is already another token's (karpor's logs tell tokens apart by name)" $i $t.name) }}
{{- end }}
{{- $names = append $names $t.name }}
{{- end }}
{{- if not $v.auth.tokens }}{{ $names = list "admin" }}{{ end }}
{{- $policies := list }}
{{- range $i, $p := $v.auth.policies }}
{{- if has $p.name $policies }}
{{- fail (printf "karpor: auth.policies[%d]: the name %s is already another policy's" $i $p.name) }}
{{- end }}
{{- $policies = append $policies $p.name }}
{{- if and (eq $p.role "admin") (hasKey $p "scope") }}
{{- fail (printf "karpor: auth.policies[%d] (%s) gives admin with a scope, but an admin's changes are global: leave scope out, or give editor or viewer within it" $i $p.name) }}
{{- end }}
{{- range (dig "subjects" "tokens" list $p) }}
{{- if not (has . $names) }}
{{- fail (printf "karpor: auth.policies[%d] (%s) names the token %s, which is no entry of auth.tokens (%s)" $i $p.name . (join ", " $names)) }}
{{- end }}
{{- end }}
{{- end }}
{{- with $v.auth.tokenReview }}
{{- if and .cluster .cacheFor (gt (include "karpor.seconds" .cacheFor | atoi) 600) }}
{{- fail (printf "karpor: auth.tokenReview.cacheFor=%s is above 10m: a revoked token would be honoured that long" .cacheFor) }}
{{- end }}
{{- end }}
{{- with $v.auth.oidc }}
{{- if .issuer }}
{{- if not (hasPrefix "https://" .issuer) }}
{{- fail (printf "karpor: auth.oidc.issuer=%s must be an https:// URL: karpor fetches the issuer's signing keys from it, and they must not be open to tampering" .issuer) }}
{{- end }}
{{- if not .audiences }}
{{- fail (printf "karpor: auth.oidc.issuer=%s needs auth.oidc.audiences: the client id(s) its ID tokens are issued for (karpor accepts no token meant for another client)" .issuer) }}
{{- end }}
{{- $sources := list }}
{{- range (list "value" "existingConfigMap" "existingSecret") }}{{ if index $.Values.auth.oidc.ca . }}{{ $sources = append $sources (printf "auth.oidc.ca.%s" .) }}{{ end }}{{ end }}
{{- if gt (len $sources) 1 }}
{{- fail (printf "karpor: %s are given: the issuer's CA comes from one of them" (join " and " $sources)) }}
{{- end }}
{{- end }}
{{- end }}
{{- with $v.ai }}
{{- if .baseUrl }}
{{- /* Matched, not parsed: a parse error would echo the URL, and the credential in it. */}}
{{- if regexMatch "^[a-zA-Z][-+.a-zA-Z0-9]*://[^/?#]*@" .baseUrl }}
{{- fail "karpor: ai.baseUrl must not hold credentials (user:password@): put the key in ai.apiKey (value, or existingSecret and key)" }}
{{- end }}
{{- if or (contains "?" .baseUrl) (contains "#" .baseUrl) }}
{{- fail (printf "karpor: ai.baseUrl=%s must have no query or fragment: karpor calls BASE/chat/completions and BASE/models below it" .baseUrl) }}
{{- end }}
{{- if not (trim .model) }}
{{- fail (printf "karpor: ai.baseUrl=%s needs ai.model: the model's name as the service knows it (e.g. gpt-4o-mini; Azure OpenAI: the deployment's name)" .baseUrl) }}
{{- end }}
{{- range (list "connectTimeout" "firstTokenTimeout" "timeout") }}
{{- $d := index $.Values.ai . }}
{{- if $d }}
{{- $s := include "karpor.seconds" $d | atoi }}
{{- if or (eq $s 0) (gt $s 1800) }}
{{- fail (printf "karpor: ai.%s=%s must be between 1ms and 30m" . $d) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.ingress.enabled }}
{{- if not $v.ingress.hosts }}
{{- fail "karpor: ingress.enabled=true needs ingress.hosts: karpor answers API requests only for the names it knows (server.allowed_hosts)" }}
{{- end }}
{{- if not $v.server.allowedHosts }}
{{- range $v.ingress.hosts }}
{{- if contains "*" .host }}
{{- fail (printf "karpor: ingress host %s is a wildcard, and karpor's server.allowed_hosts matches exact names: list the names in server.allowedHosts (or [\"*\"] for any)" .host) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.podDisruptionBudget.enabled }}
{{- $pdb := $v.podDisruptionBudget }}
{{- $min := ternary "" (toString $pdb.minAvailable) (kindIs "invalid" $pdb.minAvailable) }}
{{- $max := ternary "" (toString $pdb.maxUnavailable) (kindIs "invalid" $pdb.maxUnavailable) }}
{{- if $min }}{{ $max = "" }}{{ end }}
{{- if not (or $min $max) }}
{{- fail "karpor: podDisruptionBudget.enabled=true needs minAvailable or maxUnavailable" }}
{{- end }}
{{- if or (eq $max "0") (eq $max "0%") (eq $min "100%") (and $min (not (hasSuffix "%" $min)) (ge (atoi $min) (int $v.server.replicaCount))) }}
{{- fail (printf "karpor: podDisruptionBudget %s with server.replicaCount=%d never allows an eviction, so every node drain would stall on the server: allow at least one pod to go (e.g. maxUnavailable: 1)" (ternary (printf "minAvailable=%s" $min) (printf "maxUnavailable=%s" $max) (not (empty $min))) (int $v.server.replicaCount)) }}
{{- end }}
{{- end }}
{{- if $v.serviceMonitor.enabled }}
{{- if gt (include "karpor.seconds" $v.serviceMonitor.scrapeTimeout | atoi) (include "karpor.seconds" $v.serviceMonitor.interval | atoi) }}
{{- fail (printf "karpor: serviceMonitor.scrapeTimeout=%s is longer than serviceMonitor.interval=%s: Prometheus refuses a scrape timeout above the interval" $v.serviceMonitor.scrapeTimeout $v.serviceMonitor.interval) }}
{{- end }}
{{- end }}
{{- if and $v.networkPolicy.enabled (not $v.networkPolicy.egress.stores) }}
{{- $external := list }}
{{- if eq $v.metadata.backend "mysql" }}{{ $external = append $external "metadata.backend=mysql" }}{{ end }}
{{- if and (eq $v.metadata.backend "etcd") (not $v.metadata.etcd.bundled) }}{{ $external = append $external "an external etcd" }}{{ end }}
{{- if and (eq $v.storage.backend "elasticsearch") (not $v.storage.elasticsearch.bundled) }}{{ $external = append $external "an external Elasticsearch" }}{{ end }}
{{- if $external }}
{{- fail (printf "karpor: networkPolicy.enabled=true with %s needs networkPolicy.egress.stores (their addresses and ports), or karpor's pods cannot reach them" (join " and " $external)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The credentials in use, as a list of {name, value, existingSecret, key, secret, generated,
serverOnly}: `name` is the file under /etc/karpor/secrets, `secret` the Secret it is
mounted from (the operator's, the chart's FULLNAME for values, or a generated one), and
`serverOnly` marks what only `karpor serve` reads (API tokens). Only those the chosen
backends and settings need.
*/}}
{{- define "karpor.credentials" -}}
{{- $v := .Values }}
{{- $fullname := include "karpor.fullname" . }}
{{- $all := list }}
{{- with $v.metadata.encryptionKey }}
{{- if or .value .existingSecret }}
{{- $all = append $all (dict "name" "encryption-key" "value" .value "existingSecret" .existingSecret "key" .key) }}
{{- else if ne $v.metadata.backend "sqlite" }}
{{- /* etcd and MySQL have no key of their own: the chart makes one (SQLite keeps its
metadata.key beside the database, as it always has). */}}
{{- $all = append $all (dict "name" "encryption-key" "value" "" "existingSecret" "" "key" "encryption-key" "secret" (printf "%s-encryption-key" $fullname) "generated" true) }}
{{- end }}
{{- end }}
{{- if eq $v.metadata.backend "mysql" }}
{{- with $v.metadata.mysql.url }}{{ $all = append $all (dict "name" "mysql-url" "value" .value "existingSecret" .existingSecret "key" .key) }}{{ end }}
{{- end }}
{{- if eq $v.metadata.backend "etcd" }}
{{- with $v.metadata.etcd.password }}{{ if or .value .existingSecret }}{{ $all = append $all (dict "name" "etcd-password" "value" .value "existingSecret" .existingSecret "key" .key) }}{{ end }}{{ end }}
{{- end }}
{{- if eq $v.storage.backend "elasticsearch" }}
{{- with $v.storage.elasticsearch.password }}{{ if or .value .existingSecret }}{{ $all = append $all (dict "name" "elasticsearch-password" "value" .value "existingSecret" .existingSecret "key" .key) }}{{ end }}{{ end }}
{{- end }}
{{- with $v.health.adminToken }}{{ if or .value .existingSecret }}{{ $all = append $all (dict "name" "admin-token" "value" .value "existingSecret" .existingSecret "key" .key) }}{{ end }}{{ end }}
{{- range $i, $t := $v.auth.tokens }}
{{- $file := printf "auth-token-%d" $i }}
{{- $all = append $all (dict "name" $file "value" ($t.value | default "") "existingSecret" ($t.existingSecret | default "") "key" (ternary ($t.key | default "") $file (not (empty $t.existingSecret))) "serverOnly" true) }}
{{- end }}
{{- if not $v.auth.tokens }}
{{- $all = append $all (dict "name" "auth-token-0" "value" "" "existingSecret" "" "key" "token" "secret" (printf "%s-token" $fullname) "generated" true "serverOnly" true) }}
{{- end }}
{{- /* The model service's key: read by `karpor serve` only, and only with AI on. */}}
{{- if $v.ai.baseUrl }}
{{- with $v.ai.apiKey }}{{ if or .value .existingSecret }}{{ $all = append $all (dict "name" "ai-api-key" "value" .value "existingSecret" .existingSecret "key" .key "serverOnly" true) }}{{ end }}{{ end }}
{{- end }}
{{- $out := list }}
{{- range $all }}
{{- $c := . }}
{{- if not (hasKey $c "secret") }}{{ $_ := set $c "secret" (default $fullname $c.existingSecret) }}{{ end }}
{{- if not (hasKey $c "generated") }}{{ $_ := set $c "generated" false }}{{ end }}
{{- if not (hasKey $c "serverOnly") }}{{ $_ := set $c "serverOnly" false }}{{ end }}
{{- $out = append $out $c }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The credentials a pod of one role ("server" or "syncer") mounts. */}}
{{- define "karpor.podCredentials" -}}
{{- $out := list }}
{{- range (include "karpor.credentials" .root | fromJsonArray) }}
{{- if or (eq $.role "server") (not .serverOnly) }}{{ $out = append $out . }}{{ end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{- define "karpor.hasCredential" -}}
{{- $found := false }}
{{- range (include "karpor.credentials" .root | fromJsonArray) }}{{ if eq .name $.name }}{{ $found = true }}{{ end }}{{ end }}
{{- $found }}
{{- end }}

{{/*
A generated secret value (base64, as in a Secret's data) that survives upgrades: the live
Secret's (lookup; always empty under `helm template`), else a new one: 32 random bytes
for the encryption key, 48 letters and digits for a token. Made once per render and kept
in the root context, so the pods' checksum annotation hashes the value the Secret gets.
*/}}
{{- define "karpor.generatedValue" -}}
{{- if not (hasKey .root "karporGenerated") }}{{ $_ := set .root "karporGenerated" dict }}{{ end }}
{{- $cache := .root.karporGenerated }}
{{- $id := printf "%s/%s" .secret .key }}
{{- if not (hasKey $cache $id) }}
{{- $live := lookup "v1" "Secret" .root.Release.Namespace .secret }}
{{- $value := dig "data" .key "" $live }}
{{- if not $value }}
{{- $value = ternary (randBytes 32 | b64enc) (randAlphaNum 48 | b64enc) (eq .make "encryption-key") }}
{{- end }}
{{- $_ := set $cache $id $value }}
{{- end }}
{{- index $cache $id }}
{{- end }}

{{/*
server.allowed_hosts, as a JSON list: server.allowedHosts if given; with an ingress its
hosts, the Service's names and the loopback names (kubectl port-forward); else empty
(karpor on 0.0.0.0 then allows any Host).
*/}}
{{- define "karpor.allowedHosts" -}}
{{- $v := .Values }}
{{- if $v.server.allowedHosts }}
{{- toJson $v.server.allowedHosts }}
{{- else if $v.ingress.enabled }}
{{- $fullname := include "karpor.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := list }}
{{- range $v.ingress.hosts }}{{ $hosts = append $hosts .host }}{{ end }}
{{- $hosts = concat $hosts (list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.cluster.local" $fullname $ns) "localhost" "127.0.0.1" "[::1]") }}
{{- toJson ($hosts | uniq) }}
{{- else }}
{{- toJson list }}
{{- end }}
{{- end }}

{{- define "karpor.secretsDir" -}}/etc/karpor/secrets{{- end }}
{{- define "karpor.oidcCaDir" -}}/etc/karpor/oidc{{- end }}
{{/* Where the server's pods mount auth.policiesConfigMap's key, as policies.yaml. */}}
{{- define "karpor.policiesDir" -}}/etc/karpor/policies{{- end }}

{{/*
The OIDC issuer's CA as JSON {configMap or secret: NAME, key}, mounted in the server's
pods as oidcCaDir/ca.crt; `{}` when OIDC is off or the issuer needs no CA of its own.
*/}}
{{- define "karpor.oidcCa" -}}
{{- $o := .Values.auth.oidc }}
{{- $ca := $o.ca }}
{{- if not $o.issuer }}{{ dict | toJson }}
{{- else if $ca.existingSecret }}{{ dict "secret" $ca.existingSecret "key" $ca.key | toJson }}
{{- else if $ca.existingConfigMap }}{{ dict "configMap" $ca.existingConfigMap "key" $ca.key | toJson }}
{{- else if $ca.value }}{{ dict "configMap" (printf "%s-oidc-ca" (include "karpor.fullname" .)) "key" "ca.crt" | toJson }}
{{- else }}{{ dict | toJson }}
{{- end }}
{{- end }}
{{- define "karpor.dataDir" -}}/var/lib/karpor{{- end }}

{{/* The in-cluster URL of the bundled etcd's members. */}}
{{- define "karpor.etcdEndpoints" -}}
{{- if .Values.metadata.etcd.bundled }}
{{- $name := printf "%s-etcd" (include "karpor.fullname" .) }}
{{- $eps := list }}
{{- range $i := until (int .Values.metadata.etcd.replicas) }}
{{- $eps = append $eps (printf "http://%s-%d.%s-headless.%s.svc:2379" $name $i $name $.Release.Namespace) }}
{{- end }}
{{- toJson $eps }}
{{- else }}
{{- toJson .Values.metadata.etcd.endpoints }}
{{- end }}
{{- end }}

{{/*
karpor's config file for one role ("server" or "syncer"), as a dict rendered with toYaml.
Every key here is a key of karpor's config (deny_unknown_fields): keep them in step with
src/config and docs/configuration.md.
*/}}
{{- define "karpor.config" -}}
{{- $v := .root.Values }}
{{- $secrets := include "karpor.secretsDir" . }}
{{- $data := include "karpor.dataDir" . }}
{{- $fullname := include "karpor.fullname" .root }}
{{- $server := dict "listen" (printf "0.0.0.0:%d" (int $v.server.port)) "syncer" (not $v.syncer.separate) }}
{{- if eq .role "server" }}
{{- with (include "karpor.allowedHosts" .root | fromJsonArray) }}
{{- $_ := set $server "allowed_hosts" . }}
{{- end }}
{{- $c := $v.server.connections }}
{{- $_ := set $server "connections" (dict "header_read_timeout" $c.headerReadTimeout "idle_timeout" $c.idleTimeout "max" (int $c.max)) }}
{{- end }}
{{- /* Only the server's pods mount the certificate; karpor checks the files exist. */}}
{{- if and $v.server.tls.enabled (eq .role "server") }}
{{- $_ := set $server "tls" (dict "cert_file" "/etc/karpor/tls/tls.crt" "key_file" "/etc/karpor/tls/tls.key") }}
{{- end }}
{{- $metadata := dict "backend" $v.metadata.backend }}
{{- if eq $v.metadata.backend "sqlite" }}
{{- $_ := set $metadata "path" (printf "%s/metadata.db" $data) }}
{{- else if eq $v.metadata.backend "mysql" }}
{{- $_ := set $metadata "url" (dict "file" (printf "%s/mysql-url" $secrets)) }}
{{- else }}
{{- $etcd := dict "endpoints" (include "karpor.etcdEndpoints" .root | fromJsonArray) "prefix" $v.metadata.etcd.prefix }}
{{- with $v.metadata.etcd.username }}{{ $_ := set $etcd "username" . }}{{ end }}
{{- if eq (include "karpor.hasCredential" (dict "root" .root "name" "etcd-password")) "true" }}
{{- $_ := set $etcd "password" (dict "file" (printf "%s/etcd-password" $secrets)) }}
{{- end }}
{{- if $v.metadata.etcd.tls.enabled }}
{{- $_ := set $etcd "tls" (dict "ca_file" "/etc/karpor/etcd-tls/ca.crt" "cert_file" "/etc/karpor/etcd-tls/tls.crt" "key_file" "/etc/karpor/etcd-tls/tls.key") }}
{{- end }}
{{- $_ := set $metadata "etcd" $etcd }}
{{- end }}
{{- if eq (include "karpor.hasCredential" (dict "root" .root "name" "encryption-key")) "true" }}
{{- $_ := set $metadata "encryption_key_file" (printf "%s/encryption-key" $secrets) }}
{{- end }}
{{- $storage := dict "backend" $v.storage.backend }}
{{- if eq $v.storage.backend "sqlite" }}
{{- $_ := set $storage "path" (printf "%s/resources.db" $data) }}
{{- else }}
{{- $es := $v.storage.elasticsearch }}
{{- $_ := set $storage "url" (ternary (printf "http://%s-elasticsearch.%s.svc:9200" $fullname .root.Release.Namespace) $es.url $es.bundled) }}
{{- with $es.username }}{{ $_ := set $storage "username" . }}{{ end }}
{{- if eq (include "karpor.hasCredential" (dict "root" .root "name" "elasticsearch-password")) "true" }}
{{- $_ := set $storage "password" (dict "file" (printf "%s/elasticsearch-password" $secrets)) }}
{{- end }}
{{- $_ := set $storage "index" $es.index }}
{{- $_ := set $storage "refresh" (toString $es.refresh) }}
{{- end }}
{{- /* Checks named after the server's upstreams do not exist in the syncer, and karpor
refuses settings for an unknown check: the syncer's file leaves them out. */}}
{{- $upstreamNames := list "syncer-remote" }}
{{- range $v.readiness.upstreams }}{{ $upstreamNames = append $upstreamNames (lower .name) }}{{ end }}
{{- $checks := dict }}
{{- range $name, $check := $v.health.checks }}
{{- if or (eq $.role "server") (not (has (lower $name) $upstreamNames)) }}
{{- $_ := set $checks $name $check }}
{{- end }}
{{- end }}
{{- $health := dict "check_timeout" $v.health.checkTimeout "deadline" $v.health.deadline "cache_ttl" $v.health.cacheTtl "failure_threshold" (int $v.health.failureThreshold) "success_threshold" (int $v.health.successThreshold) "checks" $checks }}
{{- if eq (include "karpor.hasCredential" (dict "root" .root "name" "admin-token")) "true" }}
{{- $_ := set $health "admin_token" (dict "file" (printf "%s/admin-token" $secrets)) }}
{{- end }}
{{- $upstreams := list }}
{{- if eq .role "server" }}
{{- if $v.readiness.includeSyncer }}
{{- $upstreams = append $upstreams (dict "name" "Syncer-remote" "url" (printf "http://%s-syncer.%s.svc:%d/readyz" $fullname .root.Release.Namespace (int $v.syncer.service.port)) "must_ready" true) }}
{{- end }}
{{- range $v.readiness.upstreams }}
{{- $upstreams = append $upstreams (dict "name" .name "url" .url "must_ready" (ternary .must_ready true (hasKey . "must_ready"))) }}
{{- end }}
{{- end }}
{{- $e := $v.kubernetes.exec }}
{{- /* syncer.history: only the keys set, in karpor's spelling (counts as integers, which
toYaml would write as 1e+06 otherwise). */}}
{{- $syncer := dict "probe_listen" (printf "0.0.0.0:%d" (int $v.syncer.port)) }}
{{- with $v.syncer.history }}
{{- $history := dict }}
{{- if hasKey . "enabled" }}{{ $_ := set $history "enabled" .enabled }}{{ end }}
{{- with .keep }}{{ $_ := set $history "keep" . }}{{ end }}
{{- if hasKey . "maxPerCluster" }}{{ $_ := set $history "max_per_cluster" (int64 .maxPerCluster) }}{{ end }}
{{- if hasKey . "maxBytesPerCluster" }}{{ $_ := set $history "max_bytes_per_cluster" (int64 .maxBytesPerCluster) }}{{ end }}
{{- with .expireEvery }}{{ $_ := set $history "expire_every" . }}{{ end }}
{{- if $history }}{{ $_ := set $syncer "history" $history }}{{ end }}
{{- end }}
{{- $config := dict
  "server" $server
  "kubernetes" (dict "allow_link_local_servers" ($v.kubernetes.allowLinkLocalServers | default false) "exec" (dict "allowed_commands" $e.allowedCommands "timeout" $e.timeout "pass_env" $e.passEnv "allowed_env" ($e.allowedEnv | default dict)))
  "log" (dict "format" $v.log.format "level" $v.log.level)
  "metadata" $metadata
  "storage" $storage
  "syncer" $syncer
  "health" $health
  "readiness" (dict "upstreams" $upstreams)
  "shutdown" (dict "drain_delay" $v.shutdown.drainDelay "grace_period" $v.shutdown.gracePeriod)
}}
{{- /* The agent listener is the server's; its replicas forward among themselves through
KARPOR_AGENTS_PEER_URL (each pod's IP, karpor.podSpec). */}}
{{- if and (eq .role "server") $v.agents.enabled }}
{{- $a := $v.agents }}
{{- $svc := printf "%s-agents" $fullname }}
{{- $ns := .root.Release.Namespace }}
{{- $names := $a.names | default (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) }}
{{- $agents := dict "listen" (printf "0.0.0.0:%d" (int $a.port)) "names" $names "approve_joins" $a.approveJoins "certificate_lifetime" $a.certificateLifetime }}
{{- $_ := set $agents "advertise" ($a.advertise | default (printf "https://%s:%d" (first $names) (int $a.service.port))) }}
{{- $_ := set $config "agents" $agents }}
{{- end }}
{{- /* Only `karpor serve` answers the API; the syncer's file keeps auth's default. */}}
{{- if eq .role "server" }}
{{- /* The files are those of karpor.credentials: auth-token-INDEX, or auth-token-0 for
the generated admin token. */}}
{{- $tokens := list }}
{{- range $i, $t := $v.auth.tokens }}
{{- $token := dict "name" $t.name "token" (dict "file" (printf "%s/auth-token-%d" $secrets $i)) }}
{{- with $t.role }}{{ $_ := set $token "role" . }}{{ end }}
{{- $tokens = append $tokens $token }}
{{- end }}
{{- if not $v.auth.tokens }}
{{- $tokens = list (dict "name" "admin" "role" "admin" "token" (dict "file" (printf "%s/auth-token-0" $secrets))) }}
{{- end }}
{{- $auth := dict "anonymous" $v.auth.anonymous "tokens" $tokens }}
{{- with $v.auth.podLogs }}{{ $_ := set $auth "pod_logs" . }}{{ end }}
{{- if $v.auth.policies }}
{{- $policies := list }}
{{- range $v.auth.policies }}
{{- $p := dict "name" .name "subjects" .subjects "role" .role }}
{{- if hasKey . "scope" }}
{{- $scope := dict }}
{{- range $key, $value := .scope }}
{{- $_ := set $scope (ternary "cluster_labels" $key (eq $key "clusterLabels")) $value }}
{{- end }}
{{- $_ := set $p "scope" $scope }}
{{- end }}
{{- $policies = append $policies $p }}
{{- end }}
{{- $_ := set $auth "policies" $policies }}
{{- end }}
{{- if $v.auth.policiesConfigMap.name }}
{{- $_ := set $auth "policies_file" (printf "%s/policies.yaml" (include "karpor.policiesDir" .)) }}
{{- end }}
{{- with $v.auth.tokenReview }}
{{- if .cluster }}
{{- $review := dict "cluster" .cluster }}
{{- with .audiences }}{{ $_ := set $review "audiences" . }}{{ end }}
{{- with .cacheFor }}{{ $_ := set $review "cache_for" . }}{{ end }}
{{- if not (kindIs "invalid" .concurrency) }}{{ $_ := set $review "concurrency" (int .concurrency) }}{{ end }}
{{- $_ := set $auth "token_review" $review }}
{{- end }}
{{- end }}
{{- with $v.auth.oidc }}
{{- if .issuer }}
{{- $oidc := dict "issuer" .issuer "audiences" .audiences }}
{{- with .usernameClaim }}{{ $_ := set $oidc "username_claim" . }}{{ end }}
{{- if not (kindIs "invalid" .usernamePrefix) }}{{ $_ := set $oidc "username_prefix" .usernamePrefix }}{{ end }}
{{- with .groupsClaim }}{{ $_ := set $oidc "groups_claim" . }}{{ end }}
{{- if not (kindIs "invalid" .groupsPrefix) }}{{ $_ := set $oidc "groups_prefix" .groupsPrefix }}{{ end }}
{{- with .algorithms }}{{ $_ := set $oidc "algorithms" . }}{{ end }}
{{- with .clockSkew }}{{ $_ := set $oidc "clock_skew" . }}{{ end }}
{{- with .keysRefresh }}{{ $_ := set $oidc "keys_refresh" . }}{{ end }}
{{- if include "karpor.oidcCa" $.root | fromJson }}
{{- $_ := set $oidc "ca_file" (printf "%s/ca.crt" (include "karpor.oidcCaDir" .)) }}
{{- end }}
{{- $_ := set $auth "oidc" $oidc }}
{{- end }}
{{- end }}
{{- $_ := set $config "auth" $auth }}
{{- /* AI is the server's: the syncer asks no model. Only what is set; karpor's defaults
for the rest. The key's file is karpor.credentials' ai-api-key. */}}
{{- with $v.ai }}
{{- if .baseUrl }}
{{- $ai := dict "base_url" .baseUrl "model" .model }}
{{- if eq (include "karpor.hasCredential" (dict "root" $.root "name" "ai-api-key")) "true" }}
{{- $_ := set $ai "api_key" (dict "file" (printf "%s/ai-api-key" $secrets)) }}
{{- end }}
{{- with .keyHeader }}{{ $_ := set $ai "key_header" . }}{{ end }}
{{- with .connectTimeout }}{{ $_ := set $ai "connect_timeout" . }}{{ end }}
{{- with .firstTokenTimeout }}{{ $_ := set $ai "first_token_timeout" . }}{{ end }}
{{- with .timeout }}{{ $_ := set $ai "timeout" . }}{{ end }}
{{- if not (kindIs "invalid" .temperature) }}{{ $_ := set $ai "temperature" (float64 .temperature) }}{{ end }}
{{- range $name, $field := dict "maxTokens" "max_tokens" "concurrency" "concurrency" "perCaller" "per_caller" "perCallerPerMinute" "per_caller_per_minute" "maxInputBytes" "max_input_bytes" }}
{{- $n := index $.root.Values.ai $name }}
{{- if not (kindIs "invalid" $n) }}{{ $_ := set $ai $field (int $n) }}{{ end }}
{{- end }}
{{- $_ := set $config "ai" $ai }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* The probes of ../shared/health-spec.md, for a container whose port is named http. */}}
{{- define "karpor.probes" -}}
livenessProbe:
  httpGet:
    path: /livez
    port: http
    scheme: {{ .scheme }}
  initialDelaySeconds: 10
  periodSeconds: 5
  timeoutSeconds: 10
  failureThreshold: 3
  successThreshold: 1
readinessProbe:
  httpGet:
    path: /readyz
    port: http
    scheme: {{ .scheme }}
  initialDelaySeconds: 10
  periodSeconds: 5
  timeoutSeconds: 10
  failureThreshold: 3
  successThreshold: 2
{{- end }}

{{/* preStop and the termination grace period, shared by server and syncer pods. */}}
{{- define "karpor.lifecycle" -}}
{{- if gt (int .Values.shutdown.preStopSleepSeconds) 0 -}}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int .Values.shutdown.preStopSleepSeconds }}
{{- end }}
{{- end }}

{{/* Volumes of a karpor pod ("server" or "syncer"), and their mounts below. */}}
{{- define "karpor.volumes" -}}
{{- $v := .root.Values }}
{{- $fullname := include "karpor.fullname" .root -}}
- name: config
  configMap:
    name: {{ $fullname }}-config
    items:
      - key: {{ .role }}.yaml
        path: karpor.yaml
{{- $credentials := include "karpor.podCredentials" . | fromJsonArray }}
{{- if $credentials }}
- name: secrets
  projected:
    defaultMode: 0440
    sources:
      {{- range $credentials }}
      - secret:
          name: {{ .secret }}
          items:
            - key: {{ .key }}
              path: {{ .name }}
      {{- end }}
{{- end }}
{{- if and (eq .role "server") $v.server.tls.enabled }}
- name: tls
  secret:
    secretName: {{ $v.server.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- $oidcCa := include "karpor.oidcCa" .root | fromJson }}
{{- if and (eq .role "server") $oidcCa }}
- name: oidc-ca
  {{- if $oidcCa.secret }}
  secret:
    secretName: {{ $oidcCa.secret }}
    defaultMode: 0444
  {{- else }}
  configMap:
    name: {{ $oidcCa.configMap }}
    defaultMode: 0444
  {{- end }}
    items:
      - key: {{ $oidcCa.key }}
        path: ca.crt
{{- end }}
{{- /* karpor trusts the policies file only when nobody but root or itself may write it:
0444, never group- or world-writable. */}}
{{- if and (eq .role "server") $v.auth.policiesConfigMap.name }}
- name: policies
  configMap:
    name: {{ $v.auth.policiesConfigMap.name }}
    defaultMode: 0444
    items:
      - key: {{ $v.auth.policiesConfigMap.key }}
        path: policies.yaml
{{- end }}
{{- if and (eq $v.metadata.backend "etcd") $v.metadata.etcd.tls.enabled }}
- name: etcd-tls
  secret:
    secretName: {{ $v.metadata.etcd.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- if and (eq .role "server") (or (eq $v.metadata.backend "sqlite") (eq $v.storage.backend "sqlite")) }}
- name: data
  persistentVolumeClaim:
    claimName: {{ default (printf "%s-data" $fullname) $v.persistence.existingClaim }}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- with (index $v .role).extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "karpor.volumeMounts" -}}
{{- $v := .root.Values -}}
- name: config
  mountPath: /etc/karpor/config
  readOnly: true
{{- if include "karpor.podCredentials" . | fromJsonArray }}
- name: secrets
  mountPath: {{ include "karpor.secretsDir" . }}
  readOnly: true
{{- end }}
{{- if and (eq .role "server") $v.server.tls.enabled }}
- name: tls
  mountPath: /etc/karpor/tls
  readOnly: true
{{- end }}
{{- if and (eq .role "server") (include "karpor.oidcCa" .root | fromJson) }}
- name: oidc-ca
  mountPath: {{ include "karpor.oidcCaDir" . }}
  readOnly: true
{{- end }}
{{- if and (eq .role "server") $v.auth.policiesConfigMap.name }}
- name: policies
  mountPath: {{ include "karpor.policiesDir" . }}
  readOnly: true
{{- end }}
{{- if and (eq $v.metadata.backend "etcd") $v.metadata.etcd.tls.enabled }}
- name: etcd-tls
  mountPath: /etc/karpor/etcd-tls
  readOnly: true
{{- end }}
{{- if and (eq .role "server") (or (eq $v.metadata.backend "sqlite") (eq $v.storage.backend "sqlite")) }}
- name: data
  mountPath: {{ include "karpor.dataDir" . }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- with (index $v .role).extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* prometheus.io annotations of a karpor pod ("server" or "syncer"), with metrics.annotations. */}}
{{- define "karpor.metricsAnnotations" -}}
{{- $v := .root.Values }}
{{- if $v.metrics.annotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ (index $v .role).port | quote }}
prometheus.io/path: /metrics
{{- if and (eq .role "server") $v.server.tls.enabled }}
prometheus.io/scheme: https
{{- end }}
{{- end }}
{{- end }}

{{/* A karpor pod's spec: role "server" (`karpor serve`) or "syncer" (`karpor syncer`). */}}
{{- define "karpor.podSpec" -}}
{{- $v := .root.Values }}
{{- $r := index $v .role -}}
serviceAccountName: {{ include "karpor.serviceAccountName" .root }}
automountServiceAccountToken: {{ $v.serviceAccount.automountToken }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ include "karpor.terminationGracePeriodSeconds" .root }}
containers:
  - name: {{ .role }}
    image: {{ include "karpor.image" .root | quote }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    args:
      - {{ ternary "serve" "syncer" (eq .role "server") }}
      - --config
      - /etc/karpor/config/karpor.yaml
    {{- /* Every pod that runs a syncer names its member after itself. */}}
    {{- $member := or (eq .role "syncer") (not $v.syncer.separate) }}
    {{- $agents := and (eq .role "server") $v.agents.enabled }}
    {{- if or $member $r.extraEnv $agents }}
    env:
      {{- if $member }}
      - name: KARPOR_SYNCER_MEMBER
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
      {{- end }}
      {{- if $agents }}
      # Where the other replicas forward live reads for the agents connected to this one.
      - name: POD_IP
        valueFrom:
          fieldRef:
            fieldPath: status.podIP
      - name: KARPOR_AGENTS_PEER_URL
        value: "https://$(POD_IP):{{ $v.agents.port }}"
      {{- end }}
      {{- with $r.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- end }}
    ports:
      - name: http
        containerPort: {{ $r.port }}
        protocol: TCP
      {{- if $agents }}
      - name: agents
        containerPort: {{ $v.agents.port }}
        protocol: TCP
      {{- end }}
    {{- include "karpor.probes" (dict "scheme" (ternary "HTTPS" "HTTP" (and (eq .role "server") $v.server.tls.enabled))) | nindent 4 }}
    {{- include "karpor.lifecycle" .root | nindent 4 }}
    securityContext:
      {{- toYaml $v.containerSecurityContext | nindent 6 }}
    resources:
      {{- toYaml $r.resources | nindent 6 }}
    volumeMounts:
      {{- include "karpor.volumeMounts" . | nindent 6 }}
volumes:
  {{- include "karpor.volumes" . | nindent 2 }}
{{- with $r.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
