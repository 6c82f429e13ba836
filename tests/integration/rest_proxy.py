#!/usr/bin/env python3
"""A proxy in front of Apache Iceberg's REST catalog server, for archive_test.cpp (and a TLS
front for any HTTP server: the registry's https test puts it in front of the schema registry).

The server accepts any request (its /v1/oauth/tokens hands out a token to anyone and nothing is
checked), so the tests put this in front of it:

  --client-id ID --client-secret S   serve POST /v1/oauth/tokens (client credentials) itself:
                                     the right pair gets a new token, anything else 401
  --token T                          also accept the static bearer token T
  --token-uses N                     a token from /v1/oauth/tokens is refused (401) after N
                                     requests, as an expired one would be
  --lose-commit-replies N            the first N commits (POST .../tables/{t}) are forwarded and
                                     answered by the server, but the proxy closes the client's
                                     connection instead of passing the answer on
  --lose-reads-after-lost-commit N   after a commit reply is lost, the next N reads of the table
                                     (GET .../tables/{t}) are forwarded and answered by the
                                     server, and their answers lost the same way
  --commit-answers-without-location N  the first N commits are forwarded and answered by the
                                     server, and their 200s passed on without
                                     "metadata-location" ("commit answered without location")
  --fail-commits N                   the first N commits are answered 503 without being forwarded
  --hold-commit-before FILE          the first commit waits until FILE exists before it is
                                     forwarded (the test kills the server meanwhile)
  --hold-commit-after FILE           the first commit is forwarded and answered by the server;
                                     its answer waits until FILE exists, then the client's
                                     connection is closed without it
  --tls-cert PEM --tls-key PEM       speak https (TLS 1.2+) with this certificate
  --s3                               a front of an S3 server: every request header is passed on
                                     (clients sign them) and every answer header passed back
                                     (ETag, Content-Length of a HEAD, Content-Range)
  --s3-throttle N                    the first N uploads (PUT) are answered 503 SlowDown, S3's
                                     throttling answer, without being forwarded
  --s3-error N                       the N uploads after those are answered 500 InternalError,
                                     S3's answer when it fails on its side, without being forwarded
  --s3-hang N                        the N uploads after those are read and never answered: the
                                     connection stays open and silent until the client gives up
  --s3-faults-on GET                 the three above apply to reads (GET) instead of uploads;
                                     PART: to the part uploads of a multipart upload only
                                     (PUT …?partNumber=N&uploadId=…); UPLOADS: to listings of
                                     multipart uploads only (GET …?uploads)
  --s3-faults-after N                the first N requests the faults apply to pass unharmed
  --s3-clock-offset-s N              the time the S3 server stamped on each object (a HEAD's
                                     Last-Modified, a listing's LastModified) moved by N seconds,
                                     as a server whose clock is N seconds off stamps them. (Not
                                     Date: the AWS SDK would sign by it, and a server that
                                     checks request times, as MinIO does, would refuse them.)
                                     Also each listed upload's Initiated, with the next one.
  --s3-deny-uploads                  ListMultipartUploads and AbortMultipartUpload answered 403
                                     AccessDenied without being forwarded, as to a key whose policy
                                     lacks them ("uploads listing denied 403", "abort denied 403")
  --vend-s3 KEY:SECRET:TOKEN         a table's load or creation asked for vended credentials
                                     (X-Iceberg-Access-Delegation: vended-credentials) is answered
                                     with this key pair in `storage-credentials` (prefix: the
                                     table's location) and another one, "config-key", in `config`,
                                     which the spec says to look at second ("credentials vended")
  --s3-require-credential KEY:TOKEN  S3 requests signed with another key or session token are
                                     answered 403 AccessDenied without being forwarded ("S3
                                     request refused 403 key=…"), as a bucket whose policy admits
                                     only the vended credentials
                                     (--vend-s3 and --s3-require-credential: @FILE instead of the
                                     value reads it from FILE at each request, so that a test can
                                     let credentials expire and vend new ones)
  --schema-not-found N               (in front of a schema registry) the first N lookups of a
                                     schema by id (GET …/schemas/ids/<id>) are answered 404 with
                                     Confluent's error 40403 without being forwarded, as a
                                     registry node that has not read a new schema yet answers
                                     ("schema not found 404")
  --s3-initiated-as-seen             a listing of multipart uploads (ListMultipartUploads) gives
                                     each upload begun through this front the time the front
                                     forwarded its creation as its Initiated: moto answers a fixed
                                     time of 2010 for every upload

A commit the server cannot be reached for is not answered: the client's connection is closed,
as a server killed mid-request would leave it; any other request gets a 502.

Every other request is forwarded unchanged when it carries an accepted token (or always, when
no --client-id and no --token is given). Prints one line per event on stdout, flushed:
"token issued", "token refused", "credential refused", "forwarded <METHOD> <path> <status>"
(S3's multipart requests: "forwarded part PUT …", "forwarded multipart POST|DELETE …"),
"commit reply lost", "read back lost", "commit failed 503", "commit held before the server",
"commit answer held", "commit dropped", "schema not found 404", "upstream unreachable", "TLS handshake failed",
"upload throttled 503", "upload failed 500", "upload left unanswered" (with GET: "read throttled
503", "read failed 500", "read left unanswered"; with PART: "part upload throttled 503", …; with
UPLOADS: "uploads listing left unanswered", …).
"""
import argparse
import datetime
import email.utils
import http.server
import json
import os
import re
import ssl
import sys
import threading
import time

import requests

COMMIT = re.compile(r"^/v1/(.+/)?namespaces/[^/]+/tables/[^/]+$")
LISTED_TIME = re.compile(rb"<LastModified>([^<]+)</LastModified>")
UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")
LISTED_UPLOAD = re.compile(rb"<Upload>.*?</Upload>", re.S)
INITIATED = re.compile(rb"<Initiated>[^<]+</Initiated>")
UPLOADS_QUERY = re.compile(r"(^|&)uploads(=|&|$)")  # ListMultipartUploads, CreateMultipartUpload


def shift_http_date(value, seconds):
    """An HTTP date (RFC 7231) moved by `seconds`."""
    t = email.utils.parsedate_to_datetime(value) + datetime.timedelta(seconds=seconds)
    return email.utils.format_datetime(t, usegmt=True)


def shift_listed_times(body, seconds):
    """Every <LastModified> of an S3 listing (ISO 8601, UTC) moved by `seconds`."""
    def shift(m):
        t = datetime.datetime.fromisoformat(m.group(1).decode().replace("Z", "+00:00"))
        t += datetime.timedelta(seconds=seconds)
        return b"<LastModified>" + s3_time(t) + b"</LastModified>"
    return LISTED_TIME.sub(shift, body)


def s3_time(t):
    """A UTC datetime in S3's listing format."""
    return (t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z").encode()


def set_initiated(body, seen, seconds):
    """Each <Upload> of a ListMultipartUploads answer whose UploadId is in `seen` (id -> UTC
    datetime) gets that time, moved by `seconds`, as its <Initiated>."""
    def one(m):
        upload = m.group(0)
        found = UPLOAD_ID.search(upload)
        at = seen.get(found.group(1)) if found else None
        if at is None:
            return upload
        stamp = s3_time(at + datetime.timedelta(seconds=seconds))
        return INITIATED.sub(b"<Initiated>" + stamp + b"</Initiated>", upload)
    return LISTED_UPLOAD.sub(one, body)

# The answers S3 gives without acting, in the order they are used up: the count's key in the
# state, the event said, the status, S3's error code and message.
S3_ERRORS = [
    ("throttle", "throttled", 503, "SlowDown", "Please reduce your request rate."),
    ("error", "failed", 500, "InternalError",
     "We encountered an internal error. Please try again."),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--client-id")
    p.add_argument("--client-secret")
    p.add_argument("--token")
    p.add_argument("--token-uses", type=int, default=0)
    p.add_argument("--lose-commit-replies", type=int, default=0)
    p.add_argument("--lose-reads-after-lost-commit", type=int, default=0)
    p.add_argument("--fail-commits", type=int, default=0)
    p.add_argument("--commit-answers-without-location", type=int, default=0)
    p.add_argument("--hold-commit-before")
    p.add_argument("--hold-commit-after")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--s3", action="store_true")
    p.add_argument("--s3-throttle", type=int, default=0)
    p.add_argument("--s3-error", type=int, default=0)
    p.add_argument("--s3-hang", type=int, default=0)
    p.add_argument("--s3-faults-on", choices=["PUT", "GET", "PART", "UPLOADS"], default="PUT")
    p.add_argument("--s3-faults-after", type=int, default=0)
    p.add_argument("--s3-clock-offset-s", type=int, default=0)
    p.add_argument("--s3-initiated-as-seen", action="store_true")
    p.add_argument("--s3-deny-uploads", action="store_true")
    p.add_argument("--vend-s3")
    p.add_argument("--s3-require-credential")
    p.add_argument("--schema-not-found", type=int, default=0)
    args = p.parse_args()
    lock = threading.Lock()
    state = {"issued": 0, "uses": {}, "lose": args.lose_commit_replies, "fail": args.fail_commits,
             "hold_before": bool(args.hold_commit_before),
             "hold_after": bool(args.hold_commit_after), "throttle": args.s3_throttle,
             "error": args.s3_error, "hang": args.s3_hang, "unharmed": args.s3_faults_after,
             "lose_reads": 0, "not_found": args.schema_not_found,
             "no_location": args.commit_answers_without_location}
    uploads_seen = {}  # --s3-initiated-as-seen: upload id -> when its creation was forwarded
    checking = bool(args.client_id or args.token)

    def value_of(option):
        """The option's value, or the content of FILE for @FILE, read now."""
        if option and option.startswith("@"):
            with open(option[1:]) as f:
                return f.read().strip()
        return option

    def say(line):
        with lock:
            print(line, flush=True)

    def take(key):
        """True the first time only (one held commit per option)."""
        with lock:
            first = state[key]
            state[key] = False
            return first

    def wait_for_file(path):
        while not os.path.exists(path):
            time.sleep(0.05)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, status, body=b"", content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle(self):
            try:
                super().handle()
            except (ssl.SSLError, ConnectionResetError) as e:
                say(f"TLS handshake failed: {getattr(e, 'reason', None) or e}")

        def drop(self):
            """Closes the client's connection without an answer."""
            self.close_connection = True
            self.connection.shutdown(2)

        def body(self):
            """The request's body, de-chunked (S3 clients stream uploads chunked, with their
            checksum in a trailer field: kept in self.trailers, forwarded as a header)."""
            self.trailers = {}
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        break
                    data += self.rfile.read(size)
                    self.rfile.readline()  # the chunk's CRLF
                while True:  # the trailer fields, then the empty line
                    field = self.rfile.readline().decode("latin-1").strip()
                    if not field:
                        return data
                    name, _, value = field.partition(":")
                    self.trailers[name.strip()] = value.strip()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def count_down(self, key):
            """True for the first state[key] calls."""
            with lock:
                hit = state[key] > 0
                if hit:
                    state[key] -= 1
                return hit

        def s3_fault(self, method, path):
            """Throttles, fails or leaves unanswered an upload (or a read); True when taken."""
            if args.s3_require_credential:
                key, _, token = value_of(args.s3_require_credential).partition(":")
                signed = re.search(r"Credential=([^/]+)/", self.headers.get("Authorization", ""))
                used = signed.group(1) if signed else ""
                if used != key or self.headers.get("x-amz-security-token", "") != token:
                    say(f"S3 request refused 403 key={used} {method} {path}")
                    self.reply(403, b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
                                    b'AccessDenied</Code><Message>Access Denied</Message></Error>',
                               "application/xml")
                    return True
            query = self.path.partition("?")[2]
            listing = method == "GET" and UPLOADS_QUERY.search(query)
            aborting = method == "DELETE" and re.search(r"(^|&)uploadId=", query)
            if args.s3_deny_uploads and (listing or aborting):
                say(f"{'uploads listing' if listing else 'abort'} denied 403 {path}")
                self.reply(403, b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied'
                                b'</Code><Message>Access Denied</Message></Error>',
                           "application/xml")
                return True
            part = method == "PUT" and "partNumber=" in self.path
            kind = "PART" if part else "UPLOADS" if listing else None
            if args.s3_faults_on not in (method, kind):
                return False
            what = {"PUT": "upload", "GET": "read", "PART": "part upload",
                    "UPLOADS": "uploads listing"}[args.s3_faults_on]
            if self.count_down("unharmed"):
                return False
            for key, event, status, code, message in S3_ERRORS:
                if self.count_down(key):
                    say(f"{what} {event} {status} {path}")
                    self.reply(status, ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
                                        f'{code}</Code><Message>{message}</Message></Error>')
                               .encode(), "application/xml")
                    return True
            if self.count_down("hang"):
                say(f"{what} left unanswered {path}")
                time.sleep(60)
                self.drop()
                return True
            return False

        def authorized(self):
            if not checking:
                return True
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                return False
            tok = auth[len("Bearer "):]
            if args.token and tok == args.token:
                return True
            with lock:
                if tok not in state["uses"]:
                    return False
                state["uses"][tok] += 1
                return not args.token_uses or state["uses"][tok] <= args.token_uses

        def handle_any(self, method):
            data = self.body()
            path = self.path.split("?")[0]
            if method == "POST" and path.endswith("/v1/oauth/tokens") and args.client_id:
                form = dict(kv.split("=", 1) for kv in data.decode().split("&") if "=" in kv)
                if (form.get("grant_type") == "client_credentials"
                        and form.get("client_id") == args.client_id
                        and requests.utils.unquote(form.get("client_secret", "")) == args.client_secret):
                    with lock:
                        state["issued"] += 1
                        tok = f"tok-{state['issued']}"
                        state["uses"][tok] = 0
                    say("token issued")
                    self.reply(200, ('{"access_token": "%s", "token_type": "bearer", '
                                     '"expires_in": 3600}' % tok).encode())
                else:
                    say("credential refused")
                    self.reply(401, b'{"error": "invalid_client"}')
                return
            if not self.authorized():
                say("token refused")
                self.reply(401, b'{"error": {"message": "not authorized", "type": '
                                b'"NotAuthorizedException", "code": 401}}')
                return
            if method == "GET" and "/schemas/ids/" in path and self.count_down("not_found"):
                say("schema not found 404")
                self.reply(404, b'{"error_code": 40403, "message": "Schema not found"}')
                return
            commit = method == "POST" and COMMIT.match(path) is not None
            if commit:
                with lock:
                    fail = state["fail"] > 0
                    if fail:
                        state["fail"] -= 1
                if fail:
                    say("commit failed 503")
                    self.reply(503, b'{"error": {"message": "unavailable", "type": '
                                    b'"ServiceUnavailableException", "code": 503}}')
                    return
            if args.s3 and self.s3_fault(method, path):
                return
            if args.s3:
                # Host as the client signed it, the rest as sent. (The body's own S3 chunk
                # framing, aws-chunked with its checksum trailer, stays in the body.)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("content-length", "connection", "expect",
                                                "transfer-encoding")}
                headers.update(self.trailers)
            else:
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "accept")}
            if commit and take("hold_before"):
                say("commit held before the server")
                wait_for_file(args.hold_commit_before)
            try:
                r = requests.request(method, args.upstream + self.path, data=data,
                                     headers=headers, timeout=60)
            except requests.RequestException as e:
                if commit:
                    say(f"commit dropped: the server is gone ({type(e).__name__})")
                    self.drop()
                    return
                say(f"upstream unreachable {method} {path}")
                self.reply(502, b'{"error": {"message": "the catalog server is unreachable", '
                                b'"type": "BadGateway", "code": 502}}')
                return
            if commit and take("hold_after"):
                say(f"commit answer held (server answered {r.status_code})")
                wait_for_file(args.hold_commit_after)
                say("commit dropped: its answer is not passed on")
                self.drop()
                return
            if commit:
                with lock:
                    lose = state["lose"] > 0
                    if lose:
                        state["lose"] -= 1
                if lose:
                    say(f"commit reply lost (server answered {r.status_code})")
                    with lock:
                        state["lose_reads"] = args.lose_reads_after_lost_commit
                    self.drop()
                    return
            if commit and r.status_code == 200 and self.count_down("no_location"):
                answer = r.json()
                answer.pop("metadata-location", None)
                say("commit answered without location")
                self.reply(200, json.dumps(answer).encode())
                return
            if method == "GET" and COMMIT.match(path) and self.count_down("lose_reads"):
                say(f"read back lost (server answered {r.status_code})")
                self.drop()
                return
            query = self.path.partition("?")[2]
            kind = ("part " if "partNumber=" in query else
                    "multipart " if re.search(r"(^|&)(uploads|uploadId=)", query) else "")
            say(f"forwarded {kind}{method} {path} {r.status_code}")
            if args.s3:
                offset = args.s3_clock_offset_s
                content = shift_listed_times(r.content, offset) if offset else r.content
                listing_uploads = UPLOADS_QUERY.search(query)
                if args.s3_initiated_as_seen and listing_uploads and r.status_code == 200:
                    if method == "POST":  # CreateMultipartUpload
                        found = UPLOAD_ID.search(r.content)
                        if found:
                            with lock:
                                uploads_seen[found.group(1)] = datetime.datetime.now(
                                    datetime.timezone.utc)
                    elif method == "GET":  # ListMultipartUploads
                        with lock:
                            seen = dict(uploads_seen)
                        content = set_initiated(content, seen, offset)
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in ("connection", "content-length", "transfer-encoding",
                                         "content-encoding", "server", "date"):
                        if k.lower() == "last-modified" and offset:
                            v = shift_http_date(v, offset)
                        self.send_header(k, v)
                length = r.headers.get("Content-Length") if method == "HEAD" else None
                self.send_header("Content-Length", length or str(len(content)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(content)
                return
            content = r.content
            delegation = self.headers.get("X-Iceberg-Access-Delegation", "")
            if args.vend_s3 and "vended-credentials" in delegation and r.status_code == 200:
                loaded = json.loads(content)
                if "metadata-location" in loaded:
                    key, secret, token = value_of(args.vend_s3).split(":", 2)
                    loaded["storage-credentials"] = [{
                        "prefix": loaded["metadata"]["location"],
                        "config": {"s3.access-key-id": key, "s3.secret-access-key": secret,
                                   "s3.session-token": token}}]
                    loaded.setdefault("config", {}).update({
                        "s3.access-key-id": "config-key", "s3.secret-access-key": "config-secret"})
                    content = json.dumps(loaded).encode()
                    say(f"credentials vended {method} {path}")
            self.reply(r.status_code, content, r.headers.get("Content-Type", "application/json"))

        def do_GET(self):
            self.handle_any("GET")

        def do_POST(self):
            self.handle_any("POST")

        def do_HEAD(self):
            self.handle_any("HEAD")

        def do_DELETE(self):
            self.handle_any("DELETE")

        def do_PUT(self):
            self.handle_any("PUT")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.listen), Handler)
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(args.tls_cert, args.tls_key)
        # The handshake runs in the handler's thread: a client that refuses the certificate
        # fails only its own connection.
        server.socket = context.wrap_socket(server.socket, server_side=True,
                                            do_handshake_on_connect=False)
    say(f"listening on 127.0.0.1:{args.listen}")
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
