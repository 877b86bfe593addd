# syntax=docker/dockerfile:1
# A handler runner from services/: every runner is the same recipe (the
# services module, one main under services/<RUNNER>/cmd/<RUNNER>), so one
# Dockerfile serves them all; RUNNER picks which.
# Build from the repository root (make images does, once per runner):
#   docker build -f deploy/docker/runner.Dockerfile --build-arg RUNNER=example-runner \
#     -t realm/example-runner:dev .
# The binary is static (CGO off) and the final image is distroless/static:
# no shell, no package manager, user 65532 (nonroot).

ARG GO_VERSION=1.26.11

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
COPY pkg/go.* pkg/
COPY services/go.* services/
RUN cd services && go mod download
COPY pkg/ pkg/
COPY services/ services/
ARG RUNNER=example-runner
# CMD is the main package's folder inside services/.
ARG CMD=${RUNNER}/cmd/${RUNNER}
ARG VERSION=0.0.0-dev
RUN cd services && go build -trimpath \
      -ldflags "-s -w -X github.com/realm-go/realm/pkg/version.Version=${VERSION}" \
      -o /out/runner ./${CMD}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/runner /runner
USER 65532:65532
EXPOSE 7072
ENTRYPOINT ["/runner"]
