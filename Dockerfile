# syntax=docker/dockerfile:1
# karpor's image: the `karpor` binary on a distroless base, running as non-root.
# The Helm chart (charts/karpor) refers to it as `karpor:<appVersion>`:
#   docker build -t REGISTRY/karpor:0.1.0 .
#   helm install karpor charts/karpor --set image.repository=REGISTRY/karpor
# Untested: no machine of this project can run a container build (see
# docs/deployment.md).

# Build: the Rust toolchain the project is developed with; protoc and the protobuf
# well-known types (etcd-client's protos import google/protobuf/*.proto) for etcd-client.
FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin karpor \
 && cp target/release/karpor /karpor

# Run: glibc and libgcc only (TLS is rustls, SQLite is bundled), no shell, user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /karpor /usr/local/bin/karpor
USER 65532:65532
WORKDIR /var/lib/karpor
# 7443: `karpor serve`; 7444: `karpor syncer`'s probes and metrics.
EXPOSE 7443 7444
ENTRYPOINT ["/usr/local/bin/karpor"]
CMD ["serve", "--config", "/etc/karpor/config/karpor.yaml"]
