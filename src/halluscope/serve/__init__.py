"""``halluscope serve``: a monitoring service that checks answers as they happen, stores every result, and learns
from reviewers (API in :mod:`.app`, storage in :mod:`.db` and :mod:`.store`, scoring in :mod:`.worker`)."""

from __future__ import annotations

import ipaddress
import os
import sys

from .app import ServeConfig, create_app

__all__ = ["ServeConfig", "create_app", "run", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Start the service (blocking). With auth on and no key in the database yet, an admin key is created and
    printed once to stderr. ``auth=False`` is refused unless ``host`` is a loopback address."""
    import sqlalchemy as sa
    import uvicorn

    from .auth import ensure_admin_key
    from .db import make_engine, reason, shown, url_of, writable

    if not config.auth and not is_loopback(host):
        raise ValueError(f"--no-auth is only allowed on a loopback address, not {host}")
    _can_listen(host, port)  # before the database is touched: no admin key printed for a server that never ran
    writable(url_of(config.db))
    if log_level not in ("debug", "info", "warning", "error"):
        raise ValueError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    safe = shown(config.db)
    try:
        app = create_app(config)  # checks the methods and the calibration file: nothing is written before
        engine = make_engine(config.db)
        key = ensure_admin_key(engine) if config.auth else None
        engine.dispose()
    except sa.exc.DatabaseError as e:  # a server that is not there, a refused login, a file it cannot open or read
        raise ValueError(f"cannot open the database {safe}: {reason(e)}") from None
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as e:  # a URL that is not one
        raise ValueError(f"--db {safe}: not a SQLite path or a database URL ({e})") from None
    if key:
        print(f"halluscope: first start: admin API key (shown once, keep it): {key}", file=sys.stderr, flush=True)
    cal = ""
    if config.calibration:
        there = os.path.exists(config.calibration)
        cal = f"; calibration {config.calibration}, watched{'' if there else ': the packaged one until it appears'}"
    print(f"halluscope: serving on http://{host}:{port} (database {safe}{cal}; docs at /docs)", file=sys.stderr,
          flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, log_config=log_config(log_level))


def _can_listen(host: str, port: int) -> None:
    """A port out of range, or one this host cannot listen on (in use, not permitted), is a ValueError (exit 2),
    not uvicorn's exit 3 after the start-up ran."""
    import errno
    import socket

    if type(port) is not int or not 1 <= port <= 65535:
        raise ValueError(f"--port must be 1-65535, got {port!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ValueError(f"--host {host}: {e.strerror}") from None
    errors = []
    for family, kind, proto, _, addr in infos:  # every address the name gives (localhost: ::1 and 127.0.0.1)
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                s.bind(addr)
            except OSError as e:
                errors.append(e)
    in_use = [e for e in errors if e.errno == errno.EADDRINUSE]
    if in_use or len(errors) == len(infos):  # one taken, or none usable (an address family off is no matter)
        raise ValueError(f"cannot listen on {host}:{port}: {(in_use or errors)[0].strerror}")


def log_config(level: str = "info") -> dict:
    """uvicorn's logging with a time (ISO 8601, with its offset) on every line, halluscope's own lines among
    them (job and key events, store errors), each with its level."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    cfg = copy.deepcopy(LOGGING_CONFIG)
    when = {"datefmt": "%Y-%m-%dT%H:%M:%S%z"}
    cfg["formatters"]["default"].update(fmt="%(asctime)s %(levelprefix)s %(message)s", **when)
    cfg["formatters"]["access"].update(
        fmt='%(asctime)s %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s', **when)
    cfg["loggers"]["halluscope"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return cfg
