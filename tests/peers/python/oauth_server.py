"""Switchboard test peer: an OAuth-protected MCP server on the official Python SDK.

One process is both the MCP server (Streamable HTTP on /mcp, or legacy SSE on /sse
with --transport sse) and its authorization
server (the SDK's auth routes: RFC 9728 + RFC 8414 metadata, /register, /authorize,
/token, /revoke). The in-memory provider auto-approves /authorize (302 straight to the
redirect URI), so a test can "log in" with a plain HTTP client following redirects.

Usage:
    python oauth_server.py --port P [--access-ttl SECONDS] [--scopes "mcp"]
                           [--no-rotation] [--refuse-registration] [--step-up]
                           [--transport streamable-http|sse] [--iss-parameter]
                           [--refuse-tokens]

- Refresh tokens rotate: a used refresh token is invalidated at once (reusing it is
  `invalid_grant`), unless --no-rotation.
- --step-up: the `admin` tool needs the extra scope `mcp:admin`; without it the server
  answers 403 `insufficient_scope` (RFC 6750 §3.1) naming the wider scope.
- --iss-parameter: RFC 9207. The authorization-server metadata says
  `authorization_response_iss_parameter_supported: true` and every authorization
  response carries `iss` (the metadata's `issuer`).
- --refuse-tokens: the resource server answers 401 to every access token (logins and
  refreshes still work), as a server whose tokens are revoked behind the client's back.
- Test endpoints (no auth): POST /test/revoke-all revokes every token; POST
  /test/expire-access drops every access token (refresh tokens stay); GET /test/stats
  returns counters (registrations, authorizations, code exchanges, refreshes,
  refresh failures) as JSON.

Binds 127.0.0.1 only.
"""

import argparse
import json
import secrets
import sys
import time

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

STATS = {
    "registrations": 0,
    "authorizations": 0,
    "code_exchanges": 0,
    "refreshes": 0,
    "refresh_failures": 0,
}


class Provider:
    """In-memory authorization server that approves every request."""

    def __init__(self, access_ttl: int, rotate: bool, refuse_registration: bool, resource: str):
        self.access_ttl = access_ttl
        self.rotate = rotate
        self.refuse_registration = refuse_registration
        self.resource = resource
        self.refuse_tokens = False
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if self.refuse_registration:
            raise RegistrationError(
                error="invalid_client_metadata", error_description="registration is closed on this test server"
            )
        STATS["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        STATS["authorizations"] += 1
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        if ISSUER["value"] is not None:
            return construct_redirect_uri(
                str(params.redirect_uri), code=code, state=params.state, iss=ISSUER["value"]
            )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str):
        code = self.codes.get(authorization_code)
        if code is None or code.client_id != client.client_id:
            return None
        return code

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        now = int(time.time())
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=now + self.access_ttl, resource=resource
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.access_ttl,
            scope=" ".join(scopes) if scopes else None,
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        if authorization_code.resource not in (None, self.resource):
            raise TokenError(error="invalid_target", error_description=f"unknown resource {authorization_code.resource}")
        STATS["code_exchanges"] += 1
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str):
        token = self.refresh.get(refresh_token)
        if token is None or token.client_id != client.client_id:
            STATS["refresh_failures"] += 1
            return None
        return token

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.rotate:
            # Rotation: the used refresh token is dead from now on.
            self.refresh.pop(refresh_token.token, None)
        STATS["refreshes"] += 1
        issued = self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)
        if not self.rotate:
            self.refresh.pop(issued.refresh_token, None)
            issued.refresh_token = None
        return issued

    async def load_access_token(self, token: str) -> AccessToken | None:
        if self.refuse_tokens:
            return None
        access = self.access.get(token)
        if access is None:
            return None
        if access.expires_at is not None and access.expires_at < time.time():
            return None
        return access

    async def revoke_token(self, token) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def revoke_all(self) -> None:
        self.access.clear()
        self.refresh.clear()

    def expire_access(self) -> None:
        self.access.clear()

    async def exchange_identity_assertion(self, client, params):
        raise TokenError(error="unsupported_grant_type", error_description="not supported here")


def step_up_middleware(app, resource_metadata_url: str, base_scopes: list[str]):
    """403 insufficient_scope for `tools/call admin` without `mcp:admin`."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
            await app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        needs_admin = False
        try:
            doc = json.loads(body or b"{}")
            needs_admin = (
                isinstance(doc, dict)
                and doc.get("method") == "tools/call"
                and (doc.get("params") or {}).get("name") == "admin"
            )
        except ValueError:
            pass
        if needs_admin:
            token = None
            for k, v in scope.get("headers", []):
                if k.lower() == b"authorization" and v.lower().startswith(b"bearer "):
                    token = v[7:].decode()
            access = await PROVIDER.load_access_token(token) if token else None
            if access is not None and "mcp:admin" not in access.scopes:
                wanted = " ".join(base_scopes + ["mcp:admin"])
                header = (
                    f'Bearer error="insufficient_scope", scope="{wanted}", '
                    f'resource_metadata="{resource_metadata_url}", error_description="the admin tool needs mcp:admin"'
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"www-authenticate", header.encode()), (b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error":"insufficient_scope"}'})
                return
        await app(scope, replay, send)

    return wrapped


PROVIDER: Provider
# With --iss-parameter: the issuer the metadata publishes (learnt from it), sent as `iss`.
ISSUER: dict = {"value": None}


def iss_middleware(app):
    """RFC 9207: adds `authorization_response_iss_parameter_supported` to the
    authorization-server metadata and remembers its `issuer` for the redirects."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/.well-known/oauth-authorization-server"):
            await app(scope, receive, send)
            return
        start = {}
        chunks = []

        async def capture(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, capture)
        body = b"".join(chunks)
        if start.get("status") == 200:
            doc = json.loads(body)
            doc["authorization_response_iss_parameter_supported"] = True
            ISSUER["value"] = doc["issuer"]
            body = json.dumps(doc).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": start.get("status", 500), "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapped


def main() -> None:
    global PROVIDER
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--access-ttl", type=int, default=3600, help="access token lifetime in seconds")
    parser.add_argument("--scopes", default="mcp", help="space-separated scopes the resource requires")
    parser.add_argument("--no-rotation", action="store_true", help="refresh without rotating the refresh token")
    parser.add_argument("--refuse-registration", action="store_true", help="answer /register with an error")
    parser.add_argument("--step-up", action="store_true", help="the admin tool needs scope mcp:admin")
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    parser.add_argument("--refuse-tokens", action="store_true", help="answer 401 to every access token")
    parser.add_argument(
        "--iss-parameter", action="store_true", help="RFC 9207: advertise and send `iss` in authorization responses"
    )
    args = parser.parse_args()

    base = f"http://127.0.0.1:{args.port}"
    resource = f"{base}/sse" if args.transport == "sse" else f"{base}/mcp"
    scopes = args.scopes.split()
    valid = scopes + (["mcp:admin"] if args.step_up else [])
    PROVIDER = Provider(args.access_ttl, not args.no_rotation, args.refuse_registration, resource)
    PROVIDER.refuse_tokens = args.refuse_tokens
    mcp = MCPServer(
        name="switchboard-oauth-peer",
        version="1.0.0",
        log_level="WARNING",
        auth_server_provider=PROVIDER,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=resource,
            required_scopes=scopes,
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=valid),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @mcp.tool(description="Echo the message back.")
    def echo(message: str) -> str:
        return message

    @mcp.tool(description="Who is calling: client id and scopes of the access token.")
    def whoami() -> str:
        token = get_access_token()
        if token is None:
            return "anonymous"
        return f"client={token.client_id} scopes={' '.join(token.scopes)}"

    @mcp.tool(description="Needs the mcp:admin scope when the server runs with --step-up.")
    def admin() -> str:
        token = get_access_token()
        return f"admin ok ({' '.join(token.scopes) if token else 'anonymous'})"

    @mcp.custom_route("/test/revoke-all", methods=["POST"])
    async def revoke_all(request: Request) -> Response:
        PROVIDER.revoke_all()
        return JSONResponse({"revoked": True})

    @mcp.custom_route("/test/expire-access", methods=["POST"])
    async def expire_access(request: Request) -> Response:
        PROVIDER.expire_access()
        return JSONResponse({"expired": True})

    @mcp.custom_route("/test/stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        return JSONResponse(STATS)

    if args.transport == "sse":
        app = mcp.sse_app(host="127.0.0.1")
    else:
        app = mcp.streamable_http_app(host="127.0.0.1")
    if args.step_up:
        app = step_up_middleware(app, f"{base}/.well-known/oauth-protected-resource/mcp", scopes)
    if args.iss_parameter:
        app = iss_middleware(app)
    sys.stderr.write(f"oauth peer listening on {base}\n")
    sys.stderr.flush()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
