"""A small OAuth 2.1 authorization server for the tests, on authlib and Flask.

    python authorization_server.py

Listens on a free loopback port and prints its issuer (http://127.0.0.1:PORT/oauth)
on the first line of stdout. It publishes its metadata (RFC 8414) at
/.well-known/oauth-authorization-server/oauth, registers clients dynamically (RFC
7591), runs the authorization-code grant with PKCE (S256 required) and approves every
authorization request at once, as the user "ada"; its access tokens are JWTs (RFC 9068)
signed RS256 with a key made at start, whose `aud` is the RFC 8707 `resource` the
client asked for. /oauth/jwks serves the public key.

For the tests' refusals, POST /oauth/test/mint with a JSON object of claims signs a
token with the same key (the issuer, an hour's expiry and the user are filled in).
Nothing here is fit for anything but a test.
"""

import json
import secrets
import sys
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from flask import Flask
from flask import jsonify
from flask import request
from joserfc import jwt
from joserfc.jwk import RSAKey
from werkzeug.serving import make_server

USER_ID = "ada"
SCOPES = ["mcp:tools"]
KEY = RSAKey.generate_key(2048, parameters={"kid": "test-key-1", "alg": "RS256", "use": "sig"})

app = Flask(__name__)
ISSUER = ""  # set once the port is known
CLIENTS = {}
CODES = {}


def metadata():
    return {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "registration_endpoint": f"{ISSUER}/register",
        "jwks_uri": f"{ISSUER}/jwks",
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic", "none"],
        "code_challenge_methods_supported": ["S256"],
    }


class User:
    def get_user_id(self):
        return USER_ID


class Client(ClientMixin):
    def __init__(self, info, meta):
        self.info = info
        self.meta = meta

    def get_client_id(self):
        return self.info["client_id"]

    def get_default_redirect_uri(self):
        return self.meta["redirect_uris"][0]

    def get_allowed_scope(self, scope):
        return " ".join(s for s in (scope or "").split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in self.meta.get("redirect_uris", [])

    def check_client_secret(self, client_secret):
        return secrets.compare_digest(client_secret, self.info["client_secret"])

    def check_endpoint_auth_method(self, method, endpoint):
        if endpoint == "token":
            return method == self.meta.get("token_endpoint_auth_method", "client_secret_basic")
        return True

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in self.meta.get("grant_types", ["authorization_code"])


class Code:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code, request):
        CODES[code] = Code(
            code=code,
            client_id=request.client.get_client_id(),
            redirect_uri=request.payload.redirect_uri,
            scope=request.scope,
            code_challenge=request.payload.data.get("code_challenge"),
            code_challenge_method=request.payload.data.get("code_challenge_method"),
        )

    def query_authorization_code(self, code, client):
        found = CODES.get(code)
        if found and found.client_id == client.get_client_id():
            return found
        return None

    def delete_authorization_code(self, authorization_code):
        CODES.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return User()


class Registration(ClientRegistrationEndpoint):
    def authenticate_token(self, request):
        return "anonymous"  # open registration, as MCP clients expect

    def get_server_metadata(self):
        return metadata()

    def save_client(self, client_info, client_metadata, request):
        client = Client(client_info, client_metadata)
        CLIENTS[client.get_client_id()] = client
        return client


class TokenGenerator(JWTBearerTokenGenerator):
    def get_jwks(self):
        return KEY

    def get_audiences(self, client, user, scope):
        # RFC 8707: the resource the client asked for is the token's audience.
        return request.form.get("resource") or client.get_client_id()


server = AuthorizationServer(app, query_client=CLIENTS.get, save_token=lambda token, request: None)
server.register_grant(CodeGrant, [CodeChallenge(required=True)])
server.register_endpoint(Registration)


@app.get("/.well-known/oauth-authorization-server/oauth")
def authorization_server_metadata():
    return jsonify(metadata())


@app.get("/oauth/jwks")
def jwks():
    return jsonify({"keys": [KEY.as_dict(private=False)]})


@app.post("/oauth/register")
def register():
    return server.create_endpoint_response("client_registration")


@app.get("/oauth/authorize")
def authorize():
    # Approved at once: the test's user consents to everything.
    return server.create_authorization_response(grant_user=User())


@app.post("/oauth/token")
def token():
    return server.create_token_response()


@app.post("/oauth/test/mint")
def mint():
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": USER_ID, "iat": now, "exp": now + 3600, "scope": " ".join(SCOPES)}
    claims.update(request.get_json(force=True))
    header = {"alg": "RS256", "typ": "at+jwt", "kid": KEY.kid}
    return jsonify({"access_token": jwt.encode(header, claims, KEY)})


def main():
    global ISSUER
    http = make_server("127.0.0.1", 0, app, threaded=True)
    ISSUER = f"http://127.0.0.1:{http.server_port}/oauth"
    server.register_token_generator("default", TokenGenerator(issuer=ISSUER))
    print(ISSUER, flush=True)
    http.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
