"""Django's PostgreSQL backend, with the hot statements planned on every new connection
(pgarrays.warm). Named as the ENGINE of DATABASES (notify.env.database_from_url)."""
