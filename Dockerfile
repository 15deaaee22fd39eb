# toolmend container image.
#
#   docker build -t toolmend .
#   docker run --rm -p 127.0.0.1:8080:8080 -e TOOLMEND_UPSTREAM=https://api.openai.com/v1 toolmend
#
# Every setting comes from TOOLMEND_* environment variables (README "Settings" and "Container").
# PYTHON_IMAGE may name any Debian-like image with Python >= 3.11, `python` on PATH and the venv module
# (CI builds on a locally made stand-in because no registry is reachable there: .ci/container-smoke).
ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: wheels for the app and its dependencies, installed into a virtual environment ----
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/toolmend
# Dependencies first, read from pyproject.toml, so a code-only change reuses this layer: the core ones
# and those of the extras named in TOOLMEND_EXTRAS ("fast": uvloop, hiredis; httptools is a core dependency).
ARG TOOLMEND_EXTRAS="fast"
COPY pyproject.toml ./
RUN python -c "import os, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extras = p.get('optional-dependencies', {}); \
print('\n'.join(p['dependencies'] + [r for e in os.environ['TOOLMEND_EXTRAS'].split() for r in extras.get(e, [])]))" \
    > requirements.txt \
 && /opt/toolmend/bin/pip wheel --no-cache-dir --wheel-dir /wheels -r requirements.txt
COPY README.md ./
COPY proxy ./proxy
# The app itself from the local wheels only (no index): the image holds exactly what was built above.
# pip and setuptools are removed from the runtime environment: nothing installs at run time.
RUN /opt/toolmend/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/toolmend/bin/pip install --no-cache-dir --no-index --find-links /wheels -r requirements.txt \
 && /opt/toolmend/bin/pip install --no-cache-dir --no-index --no-deps /wheels/toolmend-*.whl \
 && /opt/toolmend/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && /opt/toolmend/bin/toolmend --version

# ---- runtime: the same base, the virtual environment, a non-root user ----
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="toolmend" \
      org.opencontainers.image.description="OpenAI-compatible reverse proxy that repairs tool-call histories for strict providers" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/toolmend/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TOOLMEND_HOST=0.0.0.0 \
    TOOLMEND_PORT=8080 \
    TOOLMEND_MEMORY=sqlite:///data/memory.db
RUN groupadd --gid 10001 toolmend \
 && useradd --uid 10001 --gid toolmend --home-dir /data --no-create-home \
            --shell /usr/sbin/nologin toolmend \
 && mkdir /data \
 && chown toolmend:toolmend /data
COPY --from=build /opt/toolmend /opt/toolmend
# The default memory store's file, /data/memory.db, lives here: mount a volume to keep it across
# containers.
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 8080
# No curl in the image: the health check is Python's http.client (which ignores any HTTP proxy variables).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import http.client as h, os, sys; c = h.HTTPConnection('127.0.0.1', int(os.environ.get('TOOLMEND_PORT', '8080')), timeout=4); c.request('GET', '/healthz'); sys.exit(c.getresponse().status != 200)"]
# uvicorn handles SIGTERM itself: stop accepting, give in-flight requests and streams a bounded grace
# period, exit 0. It runs as PID 1 without an init process.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/toolmend/bin/toolmend"]
CMD ["serve"]
