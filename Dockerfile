# syntax=docker/dockerfile:1
#
# The otelcol-loop images for people who build with docker. `make image`
# builds the same images without a daemon (internal/devtools); a test
# there keeps this file in step with it: user, entrypoint, command, ports,
# file paths and go build flags.
#
#   docker build --target otelcol-loop -t otelcol-loop:dev .
#   docker build --target otelcol-loop-gateway -t otelcol-loop-gateway:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 --target otelcol-loop \
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg CREATED=$(git log -1 --format=%cI) -t ghcr.io/otelcol-loop/otelcol-loop:0.1.0 .

ARG GO_VERSION=1.26

# passwd and group for the user 10001, the CA bundle and /tmp: written by the
# same code as in `make image`, for the machine that builds.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS base
WORKDIR /src
COPY . .
RUN cd internal/devtools && go run ./cmd/imagebuild -rootfs /rootfs && mkdir -p /empty

# Static binaries, cross-compiled on the building machine's platform.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build-otelcol-loop
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY . .
ENV CGO_ENABLED=0 GOAMD64=v1 GOARM64=v8.0 GOFLAGS=
RUN cd cmd/otelcol-loop && GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false "-ldflags=-s -w" -o /out/otelcol-loop .

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build-otelcol-loop-gateway
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY . .
ENV CGO_ENABLED=0 GOAMD64=v1 GOARM64=v8.0 GOFLAGS=
RUN cd cmd/otelcol-loop-gateway && GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false "-ldflags=-s -w" -o /out/otelcol-loop-gateway .

FROM scratch AS otelcol-loop
ARG VERSION=0.1.0 REVISION=unknown CREATED=1970-01-01T00:00:00Z
COPY --from=base /rootfs/ /
COPY --from=build-otelcol-loop --chmod=755 /out/otelcol-loop /otelcol-loop
COPY --chmod=644 config/container.yaml /etc/otelcol-loop/config.yaml
# alert_sink's persistent queue: writable by the user (mount a volume here).
COPY --from=base --chown=10001:10001 /empty/ /var/lib/otelcol-loop/
USER 10001
EXPOSE 4317 4318 13133
ENTRYPOINT ["/otelcol-loop"]
CMD ["--config", "/etc/otelcol-loop/config.yaml"]
LABEL org.opencontainers.image.source="https://github.com/otelcol-loop/otelcol-loop" \
      org.opencontainers.image.title="otelcol-loop" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

FROM scratch AS otelcol-loop-gateway
ARG VERSION=0.1.0 REVISION=unknown CREATED=1970-01-01T00:00:00Z
COPY --from=base /rootfs/ /
COPY --from=build-otelcol-loop-gateway --chmod=755 /out/otelcol-loop-gateway /otelcol-loop-gateway
COPY --chmod=644 config/gateway-dns.yaml /etc/otelcol-loop-gateway/config.yaml
USER 10001
EXPOSE 4317 4318 13133
ENTRYPOINT ["/otelcol-loop-gateway"]
CMD ["--config", "/etc/otelcol-loop-gateway/config.yaml"]
LABEL org.opencontainers.image.source="https://github.com/otelcol-loop/otelcol-loop" \
      org.opencontainers.image.title="otelcol-loop-gateway" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
