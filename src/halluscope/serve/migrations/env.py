"""alembic environment of the service's schema: migrations run on the connection the service passes in
(``halluscope.serve.db.migrate``)."""

from alembic import context

from halluscope.serve.db import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the migrations through halluscope.serve.db.migrate(engine)")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
