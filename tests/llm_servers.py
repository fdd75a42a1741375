"""A loopback proxy for the LLM tests that injects faults (429, 500, timeouts, truncated and non-JSON bodies) in
front of a real server (the llama.cpp server, :class:`halluscope.llm.server.LlamaServer`)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


class FaultProxy:
    """Forwards POSTs to ``upstream``, injecting faults by plan. The n-th distinct request body (in order of first
    arrival) gets ``plans[n % len(plans)]``: its k-th attempt suffers ``plan[k]``, attempts after the plan pass.
    So each generation meets a fixed number of faults whatever the concurrency, and a test can count the retries
    exactly. Faults: '429' (with Retry-After), '500', 'timeout' (answers after ``delay`` s, past the client's
    timeout), 'truncated' (half the body, then the connection closes), 'nonjson' (200 with an HTML body)."""

    def __init__(self, upstream: str, plans: list[list[str]], delay: float = 3.0):
        self.upstream = upstream.rstrip("/")
        self.plans = plans
        self.delay = delay
        self.count = 0
        self.seen: list[str] = []
        self._attempts: dict[bytes, int] = {}
        self._plan_of: dict[bytes, list[str]] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with proxy._lock:
                    if body not in proxy._plan_of:
                        proxy._plan_of[body] = proxy.plans[len(proxy._plan_of) % len(proxy.plans)]
                    k = proxy._attempts.get(body, 0)
                    proxy._attempts[body] = k + 1
                    plan = proxy._plan_of[body]
                    fault = plan[k] if k < len(plan) else "ok"
                    proxy.count += 1
                    proxy.seen.append(fault)
                if fault == "429":
                    return self._send(429, b'{"error": "rate limited"}', {"Retry-After": "0.2"})
                if fault == "500":
                    return self._send(500, b'{"error": "boom"}')
                if fault == "nonjson":
                    return self._send(200, b"<html>upstream hiccup</html>", ctype="text/html")
                r = httpx.post(proxy.upstream + self.path.removeprefix("/v1"), content=body,
                               headers={"Content-Type": "application/json"}, timeout=120)
                if fault == "timeout":
                    time.sleep(proxy.delay)
                    return self._send(r.status_code, r.content)
                if fault == "truncated":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(r.content)))
                    self.end_headers()
                    self.wfile.write(r.content[: len(r.content) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                return self._send(r.status_code, r.content)

            def _send(self, code, data, headers=None, ctype="application/json"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
