# The Samsa broker image: `make image` (docker build -t samsa .), used by docker-compose.yml.
#   docker run -d -p 9092:9092 -v samsa-data:/var/lib/samsa \
#       -e KAFKA_CFG_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:9092 samsa
# Broker properties come from KAFKA_CFG_<NAME> / SAMSA_CFG_<NAME> variables
# (KAFKA_CFG_LOG_RETENTION_HOURS: log.retention.hours) and from flags after `serve`
# (docker/entrypoint.py); any other samsa command runs as is: docker run samsa dump-log ...
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what the package needs (see .dockerignore); installed, then the sources are dropped.
COPY pyproject.toml setup.py README.md /src/
COPY protocol /src/protocol
COPY storage /src/storage
COPY broker /src/broker
COPY coordinator /src/coordinator
COPY config /src/config
# samsa/: the import name; pyproject.toml's package-dir puts the folders above under it
COPY samsa /src/samsa
RUN pip install /src && rm -rf /src \
    && useradd --system --home-dir /var/lib/samsa --shell /usr/sbin/nologin samsa \
    && mkdir -p /var/lib/samsa && chown samsa:samsa /var/lib/samsa
COPY docker/entrypoint.py /usr/local/lib/samsa-image/entrypoint.py

USER samsa
WORKDIR /var/lib/samsa
VOLUME /var/lib/samsa
EXPOSE 9092
# ApiVersions on the listener the broker was started with: healthy once it answers requests
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/lib/samsa-image/entrypoint.py", "healthcheck"]
ENTRYPOINT ["python", "/usr/local/lib/samsa-image/entrypoint.py"]
CMD ["serve"]
