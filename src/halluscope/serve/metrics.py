"""Prometheus metrics of the service (``GET /metrics``), in a registry of its own (one per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("halluscope_requests_total", "HTTP requests", ["route", "method", "status"], registry=r)
        self.latency = Histogram("halluscope_request_seconds", "HTTP request latency", ["route"], registry=r,
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.answers = Counter("halluscope_answers_scored_total", "answers scored and stored", registry=r)
        self.flagged = Counter("halluscope_answers_flagged_total", "answers flagged as hallucinated", registry=r)
        self.batches = Histogram("halluscope_batch_size", "answers scored in one model pass", registry=r,
                                 buckets=(1, 2, 4, 8, 16, 32, 64))
        self.depth = Gauge("halluscope_check_queue_depth", "checks waiting for the scoring loop", registry=r)
        self.pending = Gauge("halluscope_job_records_pending", "job records waiting to be scored (NaN: the database "
                             "did not answer)", registry=r)
        self.ready = Gauge("halluscope_ready", "1 when the models are loaded and the scoring loop passes", registry=r)
        self.loop_errors = Counter("halluscope_loop_errors_total", "scoring loop passes that failed (the database, "
                                   "a model)", registry=r)
        self.store_errors = Counter("halluscope_store_errors_total", "checks and job records the database refused",
                                    registry=r)

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def batch(self, n: int) -> None:
        self.batches.observe(n)

    def scored(self, item) -> None:
        self.answers.inc()
        if item.flags.get("response"):
            self.flagged.inc()

    def queue_depth(self, fn) -> None:
        self.depth.set_function(fn)

    def watch(self, pending, ready) -> None:
        """Gauges read at each scrape: ``pending()`` job records, ``ready()`` True or False."""
        self.pending.set_function(pending)
        self.ready.set_function(lambda: float(bool(ready())))

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
