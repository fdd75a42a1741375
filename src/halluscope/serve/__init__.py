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
    from .db import make_engine, url_of

    if not config.auth and not is_loopback(host):
        raise ValueError(f"--no-auth is only allowed on a loopback address, not {host}")
    safe = url_of(config.db).split("@")[-1]
    try:
        app = create_app(config)  # checks the methods and the calibration file: nothing is written before
        engine = make_engine(config.db)
        key = ensure_admin_key(engine) if config.auth else None
        engine.dispose()
    except sa.exc.DatabaseError as e:  # a server that is not there, a refused login, a file it cannot open or read
        reason = str(e.orig or e).strip().splitlines()[0]
        raise ValueError(f"cannot open the database {safe}: {reason}") from None
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
    uvicorn.run(app, host=host, port=port, log_level=log_level)
