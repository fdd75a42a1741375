"""Load test of ``halluscope serve``: N concurrent clients for T seconds against ``POST /v1/check`` with precomputed
samples (SAC3 NQ-Open answers, 10 samples each, every text made unique per request so nothing comes from a cache)
and the default methods, on SQLite and on PostgreSQL, with checks
batched across clients (``--max-batch 16``) and without (``--max-batch 1``).

    python benchmarks/bench_serve.py                       # 100 clients, 60 s, the three configurations
    python benchmarks/bench_serve.py --clients 20 --seconds 20 --configs sqlite-b16

Prints a table (requests/s, p50/p95/p99 latency, errors, the server's peak memory, mean batch size) and writes
runs/bench_serve.json. Every request goes to a real server on 127.0.0.1; the load stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import cpu_name  # noqa: E402
from serve_helpers import Postgres, Server  # noqa: E402


def sac3_bodies(n: int = 100) -> list[dict]:
    from halluscope.evaluation.sac3 import load_sac3

    return [{"id": it.id, "prompt": it.question, "response": it.response, "samples": list(it.samples)[:10],
             "tags": {"model": "gpt-3.5", "bench": "load"}} for it in load_sac3(None, n)]


def unique(body: dict, i: int) -> dict:
    """Request ``i``: every text made new (a marker appended), so no NLI pair or embedding is served from the
    caches of earlier requests: each check costs what a new production answer costs."""
    return {**body, "id": f"{body['id']}-{i}", "response": f"{body['response']} (#{i})",
            "samples": [f"{s} (#{i})" for s in body["samples"]]}


async def load(url: str, key: str, bodies: list[dict], clients: int, seconds: float) -> dict:
    lat, errors, stop = [], [0], time.monotonic() + seconds

    async def worker(k: int, http: httpx.AsyncClient):
        i = k
        while time.monotonic() < stop:
            t = time.perf_counter()
            try:
                r = await http.post("/v1/check", json=unique(bodies[i % len(bodies)], i))
                if r.status_code == 200:
                    lat.append(time.perf_counter() - t)
                else:
                    errors[0] += 1
            except httpx.HTTPError:
                errors[0] += 1
            i += clients

    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300,
                                 limits=limits) as http:
        t0 = time.monotonic()
        await asyncio.gather(*(worker(k, http) for k in range(clients)))
        wall = time.monotonic() - t0
    a = np.asarray(lat) if lat else np.asarray([np.nan])
    return {"requests": len(lat), "errors": errors[0], "seconds": round(wall, 1), "rps": len(lat) / wall,
            "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "p99": float(np.percentile(a, 99))}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return float("nan")


def batch_mean(s: Server) -> float:
    m = httpx.get(s.url + "/metrics", headers={"Authorization": f"Bearer {s.admin_key}"}).text
    total = next(float(l.split()[-1]) for l in m.splitlines() if l.startswith("halluscope_batch_size_sum"))
    count = next(float(l.split()[-1]) for l in m.splitlines() if l.startswith("halluscope_batch_size_count"))
    return total / max(count, 1)


def run_config(name: str, db: str, batch: int, bodies, clients: int, seconds: float) -> dict:
    s = Server(db, "--max-batch", str(batch), "--rate-limit", "0").start()
    try:
        asyncio.run(load(s.url, s.admin_key, bodies[:4], 4, 3))  # warm-up: models loaded, caches primed
        out = asyncio.run(load(s.url, s.admin_key, bodies, clients, seconds))
        out.update(config=name, max_batch=batch, peak_rss_mb=round(peak_rss_mb(s.proc.pid)), mean_batch=batch_mean(s))
    finally:
        s.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--configs", default="sqlite-b16,sqlite-b1,postgresql-b16")
    args = ap.parse_args()
    import tempfile

    bodies = sac3_bodies()
    rows, pg = [], None
    for cfg in args.configs.split(","):
        kind, b = cfg.split("-b")
        if kind == "postgresql":
            pg = pg or Postgres().start()
            db = pg.create_db(f"bench{len(rows)}")
        else:
            db = str(Path(tempfile.mkdtemp()) / "bench.db")
        rows.append(run_config(cfg, db, int(b), bodies, args.clients, args.seconds))
        print(json.dumps(rows[-1]), flush=True)
    if pg:
        pg.stop()
    print(f"\n{args.clients} clients, {args.seconds:g} s, POST /v1/check (SAC3 answers, 10 samples, default methods); "
          f"CPU: {cpu_name()}")
    print("| config | requests/s | p50 s | p95 s | p99 s | errors | mean batch | server peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config']} | {r['rps']:.2f} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | {r['errors']} "
              f"| {r['mean_batch']:.1f} | {r['peak_rss_mb']} |")
    out = ROOT / "runs" / "bench_serve.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"cpu": cpu_name(), "clients": args.clients, "seconds": args.seconds, "rows": rows},
                              indent=1))


if __name__ == "__main__":
    main()
