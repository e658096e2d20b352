"""A Messages-API server that answers with JSON *text* given as it is: the scripted server builds its answers
with ``json.dumps``, which cannot make an answer nested thousands of levels deep; an attacking model can."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def deep(levels: int, inner: str = '"x"') -> str:
    """JSON text of ``levels`` nested objects and lists around ``inner``."""
    opens = "".join('{"k":' if i % 2 == 0 else "[" for i in range(levels))
    closes = "".join("}" if i % 2 == 0 else "]" for i in reversed(range(levels)))
    return opens + inner + closes


def message(content_json: str, stop_reason: str = "tool_use") -> bytes:
    return ('{"id":"msg_raw","type":"message","role":"assistant","model":"scripted-model-1","content":'
            + content_json + f',"stop_reason":"{stop_reason}","stop_sequence":null,'
            '"usage":{"input_tokens":10,"output_tokens":10,"cache_read_input_tokens":0,'
            '"cache_creation_input_tokens":0}}').encode()


def tool_use(name: str, input_json: str, ident: str = "toolu_raw1") -> str:
    return f'[{{"type":"tool_use","id":"{ident}","name":"{name}","input":{input_json}}}]'


SUBMIT = message(tool_use("submit", '{"summary":"done"}', "toolu_submit"))


class RawModelServer:
    """Answers the n-th request with ``answers[n]`` (the last one again when they run out); counts requests."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers, self.requests = list(answers), 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))  # never parsed
                body = server.answers[min(server.requests, len(server.answers) - 1)]
                server.requests += 1
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("request-id", f"req_raw_{server.requests}")
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "RawModelServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="raw-model").start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
