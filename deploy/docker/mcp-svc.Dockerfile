# syntax=docker/dockerfile:1
# mcp-svc: the MCP front door (streamable HTTP at /mcp, /healthz for probes).
# Build from the repository root (make images does):
#   docker build -f deploy/docker/mcp-svc.Dockerfile -t realm/mcp-svc:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
# Module files first, so the download layer is cached across source edits.
COPY pkg/go.* pkg/
COPY mcp-svc/go.* mcp-svc/
RUN cd mcp-svc && go mod download
COPY pkg/ pkg/
COPY mcp-svc/ mcp-svc/
ARG VERSION=0.0.0-dev
RUN cd mcp-svc && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/mcp-svc ./cmd/mcp-svc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcp-svc /mcp-svc
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/mcp-svc"]
