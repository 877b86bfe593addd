# syntax=docker/dockerfile:1
# console-svc: the web console (HTTP; pages and server-sent events).
# Build from the repository root (make images does):
#   docker build -f deploy/docker/console-svc.Dockerfile -t realm/console-svc:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
# Module files first, so the download layer is cached across source edits.
COPY pkg/go.* pkg/
COPY console-svc/go.* console-svc/
RUN cd console-svc && go mod download
COPY pkg/ pkg/
COPY console-svc/ console-svc/
ARG VERSION=0.0.0-dev
RUN cd console-svc && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/console-svc ./cmd/console-svc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/console-svc /console-svc
USER 65532:65532
EXPOSE 8070
ENTRYPOINT ["/console-svc"]
