# The crd-apiserver image: built in a Rust image, run from a small Debian image as a non-root
# user with nothing but the binary. The manifests and the Helm chart run it read-only with
# every capability dropped.
#
#   docker build -t crd-apiserver:0.1.0 .

FROM rust:1-bookworm AS build
# protoc compiles etcd's gRPC definitions for the etcd backend (`--features etcd`).
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
RUN cargo build --release --locked --features etcd --bin crd-apiserver \
 && strip target/release/crd-apiserver

FROM debian:bookworm-slim
COPY --from=build /src/target/release/crd-apiserver /usr/local/bin/crd-apiserver
# mimalloc (the binary's allocator) commits its arenas on demand: committed on reservation,
# they kept about 50 MiB more resident after a burst of writes, for no measurable speed.
ENV MIMALLOC_ARENA_EAGER_COMMIT=0
# It sweeps its heaps every 1,000 slow-path allocations rather than every 10,000: after 10,000
# watches went, it kept 119 MiB of them resident after some requests with its defaults, 7 MiB
# with this. (Purging freed pages at once, MIMALLOC_PURGE_DELAY=0, returned no more, and cost a
# start with 2,065 definitions 15% more CPU.) hack/lib/dev-server.sh runs the benchmarks with
# these lines too.
ENV MIMALLOC_GENERIC_COLLECT=1000
# 65532: the conventional "nonroot" user; the pod's securityContext uses the same ids.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/crd-apiserver"]
CMD ["serve", "--help"]
