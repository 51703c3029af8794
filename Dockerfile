# syntax=docker/dockerfile:1
# The reasoning service with its embedded defaults: heuristic controller, SQLite under /data,
# bundled example policies and prompts. Build: docker build -t reasoning-service .
# Runtime dependencies only, at the versions in requirements/runtime.lock (no eval, bench, local
# or dev extras); the project itself is installed without resolving again.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --shell /usr/sbin/nologin app
WORKDIR /app

COPY requirements/runtime.lock ./requirements/runtime.lock
RUN python -m venv /app/.venv \
    && /app/.venv/bin/pip install --no-cache-dir -r requirements/runtime.lock

COPY pyproject.toml README.md ./
COPY src ./src
COPY examples ./examples
COPY prompts ./prompts
COPY vocabulary ./vocabulary
RUN /app/.venv/bin/pip install --no-cache-dir --no-deps . \
    && mkdir -p /data \
    && chown -R 10001:10001 /data

USER 10001:10001
ENV PATH="/app/.venv/bin:${PATH}" \
    REASONING_DB_PATH=/data/reasoning.db \
    REASONING_EXAMPLES_DIR=/app/examples \
    REASONING_PROMPTS_DIR=/app/prompts \
    REASONING_VOCABULARY_PATH=/app/vocabulary/clinical-synonyms.json \
    REASONING_MODELS_DIR=/app/models \
    REASONING_HOST=0.0.0.0 \
    REASONING_PORT=8000
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('REASONING_PORT', '8000') + '/healthz', timeout=4)"]

ENTRYPOINT ["reasoning-service"]
CMD ["serve"]
