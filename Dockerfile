# The Samsa broker image used by docker-compose.yml: `docker build -t samsa .`
#   docker run samsa serve --listen ... --data-dir /var/lib/samsa [--zookeeper HOST:PORT/CHROOT]
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

USER samsa
WORKDIR /var/lib/samsa
VOLUME /var/lib/samsa
EXPOSE 9092
ENTRYPOINT ["samsa"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--data-dir", "/var/lib/samsa"]
