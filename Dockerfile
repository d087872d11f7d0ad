# The worker's image: one static binary on an empty base, run as a
# non-root user with no shell.
#
# Nothing is pulled and nothing is compiled here: scripts/image.sh builds
# the binary first (CGO_ENABLED=0, -trimpath, the version stamped into
# `worker version`) and gives this file a build context holding exactly
# what it copies: worker, ca-certificates.crt (the CA bundle, for https
# endpoints), passwd and group (the user 65532). Build with
# scripts/image.sh, not with the repository as the context.
FROM scratch
ARG VERSION=devel
LABEL org.opencontainers.image.title="fluxora-webhook-worker" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/fluxora/webhook-worker"
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY group /etc/group
COPY worker /worker
USER 65532:65532
ENTRYPOINT ["/worker"]
