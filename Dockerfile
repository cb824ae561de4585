# syntax=docker/dockerfile:1
# The perfops image for `perfops k8s` (README: "Running on Kubernetes"):
#
#   docker build -t registry.example.com/perfops:0.1.0 .
#
# Two stages: Rust's Debian 12 image builds the release binary; the runtime is
# distroless cc (Debian 12's glibc and libgcc, CA certificates, users, no shell, no
# package manager) as its "nonroot" user, 65532. perfops resolves names with glibc, so
# cluster DNS names (SERVICE.NAMESPACE.svc) work as in any pod. Without a shell or tar
# in the image, results come out with `kubectl exec POD -- perfops tar /results`.
# bench/k8s/perfops-image.sh builds the same content without Docker (for the tests).

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# Symbols stay (a backtrace names functions); debug line tables go.
ENV CARGO_PROFILE_RELEASE_STRIP=debuginfo
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p perfops \
 && install -D -m 0755 target/release/perfops /out/perfops

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/perfops /usr/local/bin/perfops
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/perfops"]
CMD ["--help"]
