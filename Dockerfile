# Switchboard team mode (`switchboard serve --team`) in a container; docs/deploy-team.md
# shows a deployment (two replicas behind a TLS reverse proxy, PostgreSQL, the key).

FROM rust:1.88-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p switchboard-cli --locked \
 && install -m 0755 target/release/switchboard /usr/local/bin/switchboard

FROM debian:bookworm-slim
# ca-certificates: HTTPS to issuers and MCP servers; curl: the HEALTHCHECK.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/switchboard switchboard
COPY --from=build /usr/local/bin/switchboard /usr/local/bin/switchboard
USER switchboard
WORKDIR /var/lib/switchboard
ENV HOME=/var/lib/switchboard \
    SWITCHBOARD_HOME=/var/lib/switchboard \
    SWITCHBOARD_LOG_FORMAT=json
EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8765/healthz || exit 1
# Add --public-origin https://… and the sign-in flags (--allow-domain, --admin) as the
# container's command; secrets come from the environment (see docs/deploy-team.md).
ENTRYPOINT ["switchboard", "serve", "--team", "--host", "0.0.0.0", "--port", "8765"]
