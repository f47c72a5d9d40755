# syntax=docker/dockerfile:1
# deltaflow: one static binary on distroless/static (CA certificates, tzdata,
# non-root user 65532, no shell). Multi-arch without emulation: the builder
# runs on the build machine's platform and cross-compiles for TARGETARCH.
#
#   docker buildx build --platform linux/arm64,linux/amd64 -t deltaflow:latest .
#   (or `make docker`; docker compose builds it for the local platform)

# The toolchain of scripts/lib.sh (GO_TOOLCHAIN), with its security fixes.
ARG GO_VERSION=1.27.3

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first: this layer is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
# Stamped into the binary: `deltaflow version`, deltaflow_build_info
# (`make docker` passes the git tag or commit).
ARG VERSION=0.0.0-dev
ARG REVISION=
# CGO_ENABLED=0: a static binary that runs on distroless/static (no libc).
# -trimpath -s -w: no build paths or symbol tables; ~30% smaller.
# -tags nonatsserver: no embedded nats-server (NATS runs as its own service
# in the stack; nats.url is required); nodevtools: no demo, produce or bench
# (the demo needs the embedded server; the tools belong on a dev machine).
# About 10 MiB less than the full build (docs/operations.md, "Binary size").
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -tags nonatsserver,nodevtools -trimpath -ldflags="-s -w -X github.com/deltaflow/deltaflow/runtime/daemon.version=${VERSION} -X github.com/deltaflow/deltaflow/runtime/daemon.revision=${REVISION}" -o /out/deltaflow ./cmd/deltaflow

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/deltaflow /usr/bin/deltaflow
COPY configs/deltaflow.yaml /etc/deltaflow/deltaflow.yaml
# distroless's nonroot user (65532); it owns nothing but its work dir: the
# table lives on S3 and NATS runs as its own service in the Pi stack.
USER nonroot:nonroot
WORKDIR /home/nonroot
# /healthz, /readyz and /metrics (http.listen in configs/deltaflow.yaml).
EXPOSE 8080
# run and healthcheck both read the configuration from $DELTAFLOW_CONFIG, so
# the healthcheck asks where http.listen says the daemon listens.
ENV DELTAFLOW_CONFIG=/etc/deltaflow/deltaflow.yaml
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/bin/deltaflow", "healthcheck"]
ENTRYPOINT ["/usr/bin/deltaflow"]
CMD ["run"]
