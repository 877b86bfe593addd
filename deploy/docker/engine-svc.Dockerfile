# syntax=docker/dockerfile:1
# engine-svc: the engine (gRPC; health on realm.v1.EngineService).
# Build from the repository root (make images does):
#   docker build -f deploy/docker/engine-svc.Dockerfile -t realm/engine-svc:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
# Module files first, so the download layer is cached across source edits.
COPY pkg/go.* pkg/
COPY engine-svc/go.* engine-svc/
RUN cd engine-svc && go mod download
COPY pkg/ pkg/
COPY engine-svc/ engine-svc/
ARG VERSION=0.0.0-dev
RUN cd engine-svc && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/engine-svc ./cmd/engine-svc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/engine-svc /engine-svc
USER 65532:65532
EXPOSE 7070
ENTRYPOINT ["/engine-svc"]
