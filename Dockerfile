FROM python:3.11-slim
WORKDIR /app
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# Pin torch first (pass PIP_EXTRA_INDEX_URL for a CPU-only or a specific CUDA build).
ARG PIP_EXTRA_INDEX_URL=""
# WordNet's database: the semantic cache's verifier reads synonyms from it.
RUN apt-get update && apt-get install -y --no-install-recommends wordnet-base \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir torch==2.13.0
COPY pyproject.toml README.md ./
COPY embedq ./embedq
COPY migrations ./migrations
RUN pip install --no-cache-dir -e .
CMD ["embedq", "--help"]
