#!/usr/bin/env bash
# perfops-image.sh: the perfops image without Docker: the same content as the repository's
# Dockerfile builds (a release perfops at /usr/local/bin/perfops, the glibc libraries it
# links, CA certificates, the distroless "nonroot" user 65532, no shell), made into a
# one-layer OCI image by image.sh and imported into a node's containerd and/or written
# as an archive.
#
#   bench/k8s/perfops-image.sh [--run-dir RUN_DIR] [--out FILE] [--binary PATH] NAME:TAG
#
#   --run-dir RUN_DIR  import into the node of start.sh RUN_DIR (K8S_NODE=1)
#   --out FILE         write the OCI archive there
#   --binary PATH      use this perfops instead of building one; it must be a glibc build
#                      for this machine (the default builds it as the Dockerfile does:
#                      cargo build --release --locked -p perfops, debug info stripped)
#
# Prints the image reference (docker.io/library/NAME:TAG) like image.sh.
#
# Why glibc and not a static build: perfops resolves names with getaddrinfo, and glibc's
# files and DNS lookups (built into libc.so.6 since glibc 2.34; Debian 12 has 2.36) read
# /etc/nsswitch.conf, /etc/hosts and the resolv.conf the kubelet writes, so cluster DNS
# names (SERVICE.NS.svc) resolve in the pod as in distroless. The libraries are the ones
# `ldd` names, copied from this machine (Debian 12, as gcr.io/distroless/cc-debian12 is).
set -euo pipefail

die() { echo "perfops-image.sh: error: $*" >&2; exit 1; }
log() { echo "perfops-image.sh: $*" >&2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
IMAGE_ARGS=()
BINARY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir|--out) IMAGE_ARGS+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --binary) BINARY="${2:?--binary needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[[ $# -eq 1 ]] || die "usage: $0 [--run-dir RUN_DIR] [--out FILE] [--binary PATH] NAME:TAG"
[[ ${#IMAGE_ARGS[@]} -gt 0 ]] || die "give --run-dir RUN_DIR and/or --out FILE"
NAME="$1"

if [[ -z "$BINARY" ]]; then
  command -v cargo >/dev/null 2>&1 || die "cargo is not on PATH"
  log "building perfops (release, --locked), as the Dockerfile does"
  # The Dockerfile's setting: symbols stay (backtraces name functions), line tables go.
  (cd "$REPO" && CARGO_PROFILE_RELEASE_STRIP=debuginfo cargo build --release --locked -p perfops >&2) ||
    die "cargo build failed"
  BINARY="${CARGO_TARGET_DIR:-$REPO/target}/release/perfops"
fi
[[ -x "$BINARY" ]] || die "no perfops binary at $BINARY"

work="$(mktemp -d "${TMPDIR:-/tmp}/perfops-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs"
cp "$BINARY" "$root/usr/local/bin/perfops"
chmod 0755 "$root/usr/local/bin/perfops"

# The loader and every library ldd names, at the paths the binary asks for.
libs=0
while read -r line; do
  path=""
  case "$line" in
    *"=> not found"*) die "ldd: $line" ;;
    *"=> /"*) path="${line#*=> }"; path="${path%% (*}" ;;
    /*) path="${line%% (*}" ;;
  esac
  [[ -n "$path" ]] || continue
  mkdir -p "$root$(dirname "$path")"
  cp -L "$path" "$root$path"
  libs=$((libs + 1))
done < <(ldd "$BINARY")
[[ $libs -gt 0 ]] || die "ldd named no libraries: is $BINARY a glibc (dynamic) build?"

# What distroless' base gives: users, name-service order, CA certificates (TLS targets).
# (image.sh makes every file root's, so no home folder for 65532: the pods' working
# directory is an emptyDir at /tmp.)
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' \
  >"$root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
if [[ -r /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
else
  log "no /etc/ssl/certs/ca-certificates.crt here: the image trusts no CA (https targets fail to verify)"
fi

log "root filesystem: perfops and $libs libraries ($(du -sh "$root" | cut -f1))"
"$HERE/image.sh" "${IMAGE_ARGS[@]}" --entrypoint /usr/local/bin/perfops --user 65532:65532 \
  --env PATH=/usr/local/bin:/usr/bin:/bin --workdir / "$NAME" "$root"
