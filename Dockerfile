# Notify: one image for the web server (gunicorn, WSGI), the live stream's server
# (uvicorn, ASGI), the Celery workers, beat, the outbox relay and Flower.

# The front-end libraries the pages serve (Chart.js, for the admin's charts), as
# package-lock.json pins them, copied where Django serves them (scripts/vendor_static.sh);
# Node stays in this stage.
FROM node:20-slim AS vendored
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/vendor_static.sh scripts/
RUN bash scripts/vendor_static.sh --omit=dev

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# libpq5: lets psycopg fall back to its libpq-based implementation if the binary
# wheel is unavailable for the platform. Everything else ships as wheels.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Dependencies first, so a code change does not reinstall them: the versions pinned in
# requirements.txt, hash-checked (`make lock` writes it from pyproject.toml). Then the
# project itself, with the setuptools pinned there: it declares no packages of its own
# (the code runs from /app), so pyproject.toml is all that build needs.
COPY pyproject.toml requirements.txt ./
RUN pip install --require-hashes -r requirements.txt \
    && pip install --no-deps --no-build-isolation .

COPY . .
COPY --from=vendored /app/analytics/static/analytics/vendor/ analytics/static/analytics/vendor/

# Static files for whitenoise; settings need no services to load, only a secret. The
# translations' .mo files are built from the .po sources (with Babel: no gettext here).
# The code's bytecode is compiled here: with PYTHONDONTWRITEBYTECODE (and /app not
# writable by the user the processes run as) each process start would compile every
# module of the project it imports again.
RUN DJANGO_SECRET_KEY=build-only-dummy python manage.py collectstatic --noinput --verbosity 0 \
    && python -m scripts.compile_messages \
    && python -m compileall -q -x node_modules .

RUN useradd --system --uid 10001 --home-dir /app notify \
    && mkdir -p /app/var \
    && chown notify /app/var
USER notify

# The web server by default, through the same script as the Procfile (scripts/web.sh;
# programs come from PATH here, there is no .venv); compose runs the stream server, the
# workers, beat and the relay from this image with their own scripts. In a container the
# server must listen on every interface, not only on loopback.
ENV HOST=0.0.0.0 \
    PORT=8000
EXPOSE 8000
CMD ["bash", "scripts/web.sh"]
