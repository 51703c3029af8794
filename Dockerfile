# syntax=docker/dockerfile:1
# The reasoning service with its embedded defaults: heuristic controller, SQLite under /data,
# bundled example policies and prompts. Build: docker build -t reasoning-service .
# The install step is `make setup`, the same as on a developer machine and in CI.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# make runs the install; nothing else is needed at run time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends make=4.* \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --shell /usr/sbin/nologin app
WORKDIR /app

COPY pyproject.toml Makefile README.md ./
COPY src ./src
COPY examples ./examples
COPY prompts ./prompts
RUN make setup PYTHON=python \
    && mkdir -p /data \
    && chown -R 10001:10001 /data

USER 10001:10001
ENV PATH="/app/.venv/bin:${PATH}" \
    REASONING_DB_PATH=/data/reasoning.db \
    REASONING_HOST=0.0.0.0 \
    REASONING_PORT=8000
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('REASONING_PORT', '8000') + '/healthz', timeout=4)"]

ENTRYPOINT ["reasoning-service"]
CMD ["serve"]
