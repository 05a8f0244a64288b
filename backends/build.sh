#!/usr/bin/env bash
# Builds or fetches the real backends the end-to-end tests run, into a cache
# directory outside the clone so that every later run (and CI on the same
# machine) reuses them. Each part is skipped when its binary is present.
#
#   backends/build.sh [otelcol|otelcol-lb|jaeger|prometheus3|victoriametrics|alertmanager|grafana-schema|all]...
#
# CTXSCOPE_BACKENDS_DIR overrides the cache directory; tests read the same
# variable (tests/e2e/backends.py), so both agree on where binaries live.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Pinned releases: one place, read by tests/e2e/backends.py too.
source "$here/versions.env"
dir="${CTXSCOPE_BACKENDS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxscope-backends}"
mkdir -p "$dir/bin"
# Only the module proxy: `direct` would try github.com, which these machines cannot reach.
export GOPROXY="${GOPROXY:-https://proxy.golang.org}" GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0

log() { printf '[backends] %s\n' "$*" >&2; }
timed() { local t0=$SECONDS; "$@"; log "$1 $2: $((SECONDS - t0)) s"; }

need_go() {
  command -v go >/dev/null 2>&1 || { log "go not found: install a Go toolchain to build $1"; exit 1; }
}

otelcol() {
  # The binary's name carries the manifest's hash: editing the manifest rebuilds.
  local sum; sum="$(sha256sum "$here/otelcol-builder.yaml" | cut -c1-12)"
  local out="$dir/bin/otelcol-ctxscope-$OTELCOL_VERSION-$sum"
  if [ -x "$out" ]; then ln -sf "$(basename "$out")" "$dir/bin/otelcol-ctxscope"; log "otelcol: cached $out"; return; fi
  need_go "the Collector"
  local work; work="$(mktemp -d)"
  GOBIN="$dir/tools" go install "go.opentelemetry.io/collector/cmd/builder@v$OTELCOL_VERSION"
  sed "s#output_path: .*#output_path: $work/dist#" "$here/otelcol-builder.yaml" > "$work/manifest.yaml"
  "$dir/tools/builder" --config="$work/manifest.yaml"
  install -m 0755 "$work/dist/otelcol-ctxscope" "$out"
  ln -sf "$(basename "$out")" "$dir/bin/otelcol-ctxscope"
  rm -rf "$work"
}

otelcol_lb() {
  # The gateway recipe's first tier, a Collector of its own release (see the manifest).
  local sum; sum="$(sha256sum "$here/otelcol-lb-builder.yaml" | cut -c1-12)"
  local out="$dir/bin/otelcol-ctxscope-lb-$OTELCOL_LB_VERSION-$sum"
  if [ -x "$out" ]; then log "otelcol-lb: cached $out"; return; fi
  need_go "the load-balancing Collector"
  local work; work="$(mktemp -d)"
  GOBIN="$work/tools" go install "go.opentelemetry.io/collector/cmd/builder@v$OTELCOL_LB_VERSION"
  sed "s#output_path: .*#output_path: $work/dist#" "$here/otelcol-lb-builder.yaml" > "$work/manifest.yaml"
  "$work/tools/builder" --config="$work/manifest.yaml"
  install -m 0755 "$work/dist/otelcol-ctxscope-lb" "$out"
  rm -rf "$work"
}

jaeger() {
  local out="$dir/bin/jaeger-$JAEGER_MODULE_VERSION"
  if [ -x "$out" ]; then ln -sf "$(basename "$out")" "$dir/bin/jaeger"; log "jaeger: cached $out"; return; fi
  need_go "Jaeger"
  # `go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0` refuses: the
  # module's go.mod has a replace directive (github.com/Shopify/sarama => v1.33.0),
  # which go install does not allow. So the same module comes from the proxy with
  # `go mod download` and cmd/jaeger is built with it as the main module, where
  # its replace applies. The UI assets are not part of the module: the binary
  # serves a placeholder page, the query API is complete.
  local src work
  src="$(go mod download -json "github.com/jaegertracing/jaeger@$JAEGER_MODULE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -d "$src" ] || { log "jaeger: go mod download gave no source directory"; exit 1; }
  work="$(mktemp -d)"
  cp -r "$src/." "$work/" && chmod -R u+w "$work"
  (cd "$work" && go build -trimpath -o "$work/jaeger.bin" ./cmd/jaeger)
  install -m 0755 "$work/jaeger.bin" "$out"; rm -rf "$work"
  ln -sf "$(basename "$out")" "$dir/bin/jaeger"
}

prometheus3() {
  # Built without its service discovery plugins (the `remove_all_sd` build tag):
  # the tests configure static targets only, and the cloud SDKs the plugins pull
  # in are most of a full build's time.
  local out="$dir/bin/prometheus-$PROMETHEUS_MODULE_VERSION-nosd"
  if [ -x "$out" ]; then ln -sf "$(basename "$out")" "$dir/bin/prometheus3"; log "prometheus3: cached $out"; return; fi
  need_go "Prometheus 3"
  local gobin; gobin="$(mktemp -d)"
  GOBIN="$gobin" go install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE_VERSION"
  install -m 0755 "$gobin/prometheus" "$out"; rm -rf "$gobin"
  ln -sf "$(basename "$out")" "$dir/bin/prometheus3"
}

victoriametrics() {
  # Debian trixie's package runs on bookworm; fetched with a source list given on
  # the command line, so the system's apt configuration is left as it is.
  local vm="$dir/victoria-metrics-$VICTORIAMETRICS_DEBIAN_VERSION"
  if [ -x "$vm/usr/bin/victoria-metrics" ]; then ln -sfn "$(basename "$vm")" "$dir/victoria-metrics"; log "victoriametrics: cached $vm"; return; fi
  local uri; uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
  uri="${uri:-http://deb.debian.org/debian}"
  local apt; apt="$(mktemp -d)"; mkdir -p "$apt/lists/partial" "$apt/archives/partial"
  echo "deb $uri trixie main" > "$apt/src.list"
  local opts=(-o "Dir::Etc::sourcelist=$apt/src.list" -o Dir::Etc::sourceparts=/nonexistent
              -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::archives=$apt/archives")
  apt-get "${opts[@]}" update -qq
  (cd "$apt" && apt-get "${opts[@]}" download "victoria-metrics=$VICTORIAMETRICS_DEBIAN_VERSION")
  mkdir -p "$vm.tmp" && dpkg -x "$apt"/victoria-metrics_*.deb "$vm.tmp" && mv "$vm.tmp" "$vm"
  rm -rf "$apt"
  ln -sfn "$(basename "$vm")" "$dir/victoria-metrics"
}

alertmanager() {
  # Debian's own package: installed, not cached (the tests find it on PATH).
  command -v prometheus-alertmanager >/dev/null 2>&1 && { log "alertmanager: installed"; return; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null
}

grafana_schema() {
  # Grafana's dashboard types from npm (@grafana/schema) as a JSON schema, for
  # tests/shipped/test_grafana_schema.py: no Grafana server can be built here.
  local out="$dir/grafana-schema-$GRAFANA_SCHEMA_VERSION"
  if [ -f "$out/dashboard.schema.json" ]; then log "grafana-schema: cached $out"; return; fi
  command -v npm >/dev/null 2>&1 || { log "npm not found: install Node.js to fetch @grafana/schema"; exit 1; }
  local work; work="$(mktemp -d)"
  echo '{"private": true}' > "$work/package.json"
  (cd "$work" && npm install --silent --no-audit --no-fund \
     "@grafana/schema@$GRAFANA_SCHEMA_VERSION" "ts-json-schema-generator@$TS_JSON_SCHEMA_GENERATOR_VERSION" &&
   npx ts-json-schema-generator --path node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts \
     --type Dashboard --expose export --no-type-check -o dashboard.schema.json)
  mkdir -p "$out.tmp" && cp "$work/dashboard.schema.json" "$out.tmp/" && mv "$out.tmp" "$out"
  rm -rf "$work"
}

parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(all)
for part in "${parts[@]}"; do
  case "$part" in
    all) for p in otelcol otelcol-lb victoriametrics alertmanager grafana-schema jaeger prometheus3; do timed "$0" "$p"; done ;;
    otelcol|jaeger|prometheus3|victoriametrics|alertmanager) "$part" ;;
    otelcol-lb) otelcol_lb ;;
    grafana-schema) grafana_schema ;;
    *) log "unknown part: $part"; exit 2 ;;
  esac
done
