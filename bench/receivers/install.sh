#!/usr/bin/env bash
# install.sh: builds the real metrics receivers that perfops' push outputs are tested
# against (perfops_testkit::receivers), from source with Go, into a cache folder:
#
#   prometheus       Prometheus 3.16.0 (module github.com/prometheus/prometheus v0.316.0,
#                    cmd/prometheus): remote write 1.0 and 2.0, native histograms, the OTLP
#                    receiver with delta-to-cumulative conversion. Built with the tag
#                    remove_all_sd, which leaves out every service-discovery plugin (the
#                    cloud SDKs: most of the modules and of the build time), and without the
#                    web UI's assets (the tests use the HTTP API only).
#   perfops-otelcol  an OpenTelemetry Collector 0.165.0 of our own (otelcol/main.go): the
#                    OTLP receiver (gRPC and HTTP), the otlp_http, otlp_grpc and debug
#                    exporters, nothing else. Its version stamp includes a digest of its sources, so an edited
#                    main.go or go.mod is built again.
#
# Idempotent: a binary already built for the requested version is only checked (it runs and
# says that version); nothing is printed then.
#
#   bench/receivers/install.sh           # builds what is missing; prints the bin folder
#   FORCE=1 bench/receivers/install.sh   # rebuilds both
#
# Environment:
#   PERFOPS_RECEIVERS_HOME  cache folder (default ~/.cache/perfops-receivers); binaries go to
#                           its bin/
#   FORCE=1                 rebuild even if the binaries exist
#
# Go 1.26.7 or newer is needed (Prometheus' go.mod says so); everything comes from the Go
# module proxy. Measured from nothing (an empty GOMODCACHE and GOCACHE for each) on 2 cores
# busy with other builds (load 7 to 10): Prometheus 6 minutes (3 when it had the cores more to
# itself), 1.0 GB of modules and 0.85 GB of build cache; the Collector 4 minutes, 0.5 GB of
# modules and 0.6 GB of build cache (the two share some modules). The binaries: 52 MB and
# 37 MB. A rebuild after an edit of otelcol/ takes seconds.
set -euo pipefail

die() { echo "install.sh: error: $*" >&2; exit 1; }
log() { echo "install.sh: $*" >&2; }

PROMETHEUS_MODULE_VERSION="v0.316.0"
PROMETHEUS_VERSION="3.16.0"
COLLECTOR_VERSION="0.165.0"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOME_DIR="${PERFOPS_RECEIVERS_HOME:-${HOME:?HOME is not set}/.cache/perfops-receivers}"
BIN_DIR="$HOME_DIR/bin"
FORCE="${FORCE:-0}"

command -v go >/dev/null 2>&1 || die "'go' is not on PATH; Go 1.26.7 or newer is needed"

# What each binary must say it is: the stamp written next to it after a build, and what its
# --version prints.
collector_digest="$(cat "$HERE/otelcol/main.go" "$HERE/otelcol/go.mod" "$HERE/otelcol/go.sum" | sha256sum | cut -c1-16)"
declare -A STAMP=(
  [prometheus]="$PROMETHEUS_VERSION $PROMETHEUS_MODULE_VERSION"
  [perfops-otelcol]="$COLLECTOR_VERSION $collector_digest"
)
declare -A SAYS=(
  [prometheus]="prometheus, version $PROMETHEUS_VERSION "
  [perfops-otelcol]="perfops-otelcol version $COLLECTOR_VERSION"
)

# True when $1 is built, stamped with this version, and runs saying it.
installed() {
  local c="$1"
  [[ "$FORCE" != 1 && -x "$BIN_DIR/$c" ]] || return 1
  [[ "$(cat "$BIN_DIR/.$c.version" 2>/dev/null)" == "${STAMP[$c]}" ]] || return 1
  "$BIN_DIR/$c" --version 2>&1 | head -n 1 | grep -qF "${SAYS[$c]}"
}

missing=()
for c in prometheus perfops-otelcol; do
  installed "$c" || missing+=("$c")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$BIN_DIR"
  exit 0
fi

# Our own module settings only; ignore a go.work or -mod=vendor from the caller.
export GOWORK=off
export GOFLAGS="-buildvcs=false"
export CGO_ENABLED=0
mkdir -p "$BIN_DIR"

for c in "${missing[@]}"; do
  t0=$SECONDS
  rm -f "$BIN_DIR/.$c.version" "$BIN_DIR/$c.tmp"
  case "$c" in
    prometheus)
      log "building prometheus $PROMETHEUS_VERSION (github.com/prometheus/prometheus $PROMETHEUS_MODULE_VERSION, tag remove_all_sd; about 6 minutes the first time)"
      # `go install module@version` builds with Prometheus' own go.mod (it has no replace
      # directive), so the dependency versions are exactly the release's.
      p="github.com/prometheus/common/version"
      tmp_bin="$HOME_DIR/gobin.tmp"
      rm -rf "$tmp_bin"
      GOBIN="$tmp_bin" go install -tags remove_all_sd -trimpath \
        -ldflags "-s -w -X $p.Version=$PROMETHEUS_VERSION -X $p.Revision=$PROMETHEUS_MODULE_VERSION -X $p.Branch=module -X $p.BuildUser=perfops -X $p.BuildDate=module" \
        "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE_VERSION" ||
        die "building prometheus failed (see the messages above)"
      mv -f "$tmp_bin/prometheus" "$BIN_DIR/prometheus.tmp"
      rm -rf "$tmp_bin"
      ;;
    perfops-otelcol)
      log "building perfops-otelcol $COLLECTOR_VERSION ($HERE/otelcol; about 4 minutes the first time)"
      (cd "$HERE/otelcol" && GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -ldflags "-s -w" \
        -o "$BIN_DIR/perfops-otelcol.tmp" .) ||
        die "building perfops-otelcol failed (see the messages above)"
      ;;
  esac
  mv -f "$BIN_DIR/$c.tmp" "$BIN_DIR/$c"
  "$BIN_DIR/$c" --version 2>&1 | head -n 1 | grep -qF "${SAYS[$c]}" ||
    die "$BIN_DIR/$c does not say '${SAYS[$c]}' (it says: $("$BIN_DIR/$c" --version 2>&1 | head -n 1))"
  echo "${STAMP[$c]}" >"$BIN_DIR/.$c.version"
  log "built $c in $((SECONDS - t0))s"
done
echo "$BIN_DIR"
