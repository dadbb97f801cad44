"""Django's PostgreSQL backend, with the health check of a connection that just answered skipped
(``base``). ``settings.DATABASES`` names it for a ``postgres://`` DATABASE_URL."""
