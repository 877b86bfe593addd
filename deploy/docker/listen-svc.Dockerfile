# syntax=docker/dockerfile:1
# listen-svc: the webhook listener (HTTP).
# Build from the repository root (make images does):
#   docker build -f deploy/docker/listen-svc.Dockerfile -t realm/listen-svc:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
# Module files first, so the download layer is cached across source edits.
COPY pkg/go.* pkg/
COPY listen-svc/go.* listen-svc/
RUN cd listen-svc && go mod download
COPY pkg/ pkg/
COPY listen-svc/ listen-svc/
ARG VERSION=0.0.0-dev
RUN cd listen-svc && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/listen-svc ./cmd/listen-svc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/listen-svc /listen-svc
USER 65532:65532
EXPOSE 8090
ENTRYPOINT ["/listen-svc"]
