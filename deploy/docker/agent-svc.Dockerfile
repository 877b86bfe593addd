# syntax=docker/dockerfile:1
# agent-svc: the agent driver (gRPC; health on realm.v1.AgentService).
# Build from the repository root (make images does):
#   docker build -f deploy/docker/agent-svc.Dockerfile -t realm/agent-svc:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
# Module files first, so the download layer is cached across source edits.
COPY pkg/go.* pkg/
COPY agent-svc/go.* agent-svc/
RUN cd agent-svc && go mod download
COPY pkg/ pkg/
COPY agent-svc/ agent-svc/
ARG VERSION=0.0.0-dev
RUN cd agent-svc && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/agent-svc ./cmd/agent-svc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agent-svc /agent-svc
USER 65532:65532
EXPOSE 7071
ENTRYPOINT ["/agent-svc"]
