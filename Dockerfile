# syntax=docker/dockerfile:1
# Images of the static clawea binaries, one target each:
#   docker build --target attester --build-arg VERSION=$(git describe --tags --always --dirty) -t clawea/attester .
#   docker build --target packctl  --build-arg VERSION=$(git describe --tags --always --dirty) -t clawea/packctl .
#   docker build --target verifier --build-arg VERSION=$(git describe --tags --always --dirty) -t clawea/verifier .
# The default target is attester. Release binaries are built without cgo; the
# TPM simulator is test-only. .git is not in the build context (.dockerignore),
# so the version comes only from the VERSION build argument ("devel" without it).
#
# Run the attester inside a confidential VM with the platform device passed
# through, for example (SEV-SNP, or /dev/tdx_guest for TDX, /dev/tpmrm0 for a vTPM):
#   docker run --device /dev/sev-guest --cap-drop ALL --cap-add IPC_LOCK --read-only \
#     -v /etc/clawea:/etc/clawea:ro -v /var/lib/clawea:/var/lib/clawea \
#     -v /run/clawea:/run/clawea clawea/attester --config /etc/clawea/attester.json
# IPC_LOCK is for locked memory unless the kernel offers memfd_secret (README.md,
# "Devices"). The image runs as uid 65532 (distroless "nonroot"): the device,
# the state directory and the control socket's directory must be usable by that
# uid. /run/clawea holds the control socket (attester.controlSocket): it must be
# owned by the attester's uid, mode 0750 or stricter; the harness that drives
# runs reaches the socket through the directory's group and must connect as a
# uid listed in attester.controlUids (docs/spec/attester-api.md section 2).
# Kubernetes: deploy/helm/clawea; a VM without containers: deploy/systemd.
#
# Base images are pinned by digest, so a rebuilt tag upstream cannot change
# what is built here. The digests are those public projects pinned for these
# tags in 2026 (the build machines of this repository reach no registry, so
# they were not pulled here); refresh them on purpose, together:
#   crane digest docker.io/library/golang:1.26.8-bookworm
#   crane digest gcr.io/distroless/static-debian12:nonroot
# The Go version matches go.mod's toolchain (deploy's TestDockerfilePins).

FROM docker.io/library/golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
ARG VERSION=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/clawea/attester/cmd/internal/buildinfo.version=${VERSION}" \
      -o /out/ ./cmd/attester ./cmd/packctl ./cmd/verifier

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab AS packctl
COPY --from=build /out/packctl /usr/local/bin/packctl
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/packctl"]

# The stateless verifier service (docs/spec/verifier-api.md); no devices, no
# capabilities. Kubernetes: verifier.enabled in deploy/helm/clawea.
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab AS verifier
COPY --from=build /out/verifier /usr/local/bin/verifier
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/verifier"]

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab AS attester
COPY --from=build /out/attester /out/packctl /usr/local/bin/
USER 65532:65532
EXPOSE 8443 9464
ENTRYPOINT ["/usr/local/bin/attester"]
