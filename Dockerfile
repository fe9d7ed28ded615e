# syntax=docker/dockerfile:1
# The reconciler image: a static binary on distroless, run as a non-root
# user. Build: docker build --build-arg VERSION=$(git describe --always) -t reconciler .
# `make image` builds it when a container builder answers (docker info).

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is what `reconciler --version` and `about` show.
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.linkedVersion=${VERSION}" \
      -o /out/reconciler ./cmd/reconciler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/reconciler /usr/local/bin/reconciler
# distroless's nonroot user; no shell, no package manager.
USER 65532:65532
# The binary's default listener is loopback only; the image listens on
# every interface explicitly, so the port can be published.
ENV RECONCILER_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/reconciler", "healthcheck", "--url", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/reconciler"]
CMD ["serve"]
