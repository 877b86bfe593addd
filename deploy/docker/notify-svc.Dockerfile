# syntax=docker/dockerfile:1
# notify-svc: the Slack gate notifier (docs/notifications.md).
# Build from the repository root (make images does):
#   docker build -f deploy/docker/notify-svc.Dockerfile -t realm/notify-svc:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
# Module files first, so the download layer is cached across source edits.
COPY pkg/go.* pkg/
COPY notify-svc/go.* notify-svc/
RUN cd notify-svc && go mod download
COPY pkg/ pkg/
COPY notify-svc/ notify-svc/
ARG VERSION=0.0.0-dev
RUN cd notify-svc && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/notify-svc ./cmd/notify-svc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/notify-svc /notify-svc
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/notify-svc"]
