# syntax=docker/dockerfile:1
# Multi-stage build of the static attester and packctl binaries.
# Release binaries are built without cgo; the TPM simulator is test-only.
#
# Run inside a confidential VM with the platform devices passed through,
# for example (SEV-SNP with configfs-tsm, or TDX, or a vTPM):
#   docker run --device /dev/sev-guest --device /dev/tpmrm0 \
#     -v /sys/kernel/config:/sys/kernel/config \
#     -v /etc/clawea:/etc/clawea:ro -v /var/lib/clawea:/var/lib/clawea \
#     -v /run/clawea:/run/clawea clawea/attester --config /etc/clawea/attester.json
# The container needs IPC_LOCK for locked memory (--cap-add IPC_LOCK) unless
# the kernel offers memfd_secret; see README.md, "Devices". /run/clawea holds
# the control socket (attester.controlSocket): it must be mode 0700 and owned
# by the attester's uid, and the harness that drives runs must connect as a
# uid listed in attester.controlUids (docs/spec/attester-api.md).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/attester ./cmd/attester \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/packctl ./cmd/packctl

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/attester /out/packctl /usr/local/bin/
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/attester"]
