# syntax=docker/dockerfile:1.7
#
# toolgraph's image: one file, two variants, chosen by build argument.
#
#   docker build -t toolgraph:0.1.0-cpu .
#   docker build -t toolgraph:0.1.0-gpu --build-arg VARIANT=gpu .
#
# VARIANT=cpu  python:3.11-slim, CPU build of torch.
# VARIANT=gpu  CUDA runtime base (cuDNN included), CUDA build of torch and the [gpu]
#              extra; the host needs the NVIDIA driver and container toolkit
#              (Kubernetes: the NVIDIA device plugin or GPU operator).
#
# EXTRAS (default packs,providers) are the extras installed beside those: the tool
# packs and litellm's translation, so the image serves every setting. A deployment
# that only relays and selects builds a smaller image with --build-arg EXTRAS= .
#
# Model weights are never downloaded at start (HF_HUB_OFFLINE=1). Either mount
# them at /opt/toolgraph/models, or bake them in from a folder of the build
# context:  --build-arg MODELS_DIR=path/to/weights  (default: deploy/models,
# which holds only a README).
#
# The entrypoint is `toolgraph serve`; every setting comes from TOOLGRAPH_*
# variables or a YAML file named by TOOLGRAPH_CONFIG.

ARG VARIANT=cpu
ARG EXTRAS=packs,providers
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

# ---------------------------------------------------------------- python
FROM ${PYTHON_IMAGE} AS py

# ---------------------------------------------------------------- build
# Everything with a compiler lives here and stays here.
FROM py AS build
ARG VARIANT
ARG EXTRAS
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_GPU_INDEX=https://download.pytorch.org/whl/cu128
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Dependencies first, so that a code change does not reinstall torch.
COPY pyproject.toml README.md ./
# The torch pin is read from pyproject.toml; hadolint cannot see it.
# hadolint ignore=DL3013
RUN set -eux; \
    if [ "$VARIANT" = gpu ]; then index="$TORCH_GPU_INDEX"; else index="$TORCH_CPU_INDEX"; fi; \
    torch="$(python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); print(next(r for r in d["project"]["dependencies"] if r.startswith("torch")))')"; \
    pip install --index-url "$index" "$torch"
COPY proxy ./proxy
COPY graph_store ./graph_store
COPY retriever ./retriever
COPY eval ./eval
# The GPU image adds the [gpu] extra (FlagEmbedding, for retriever.model_kind bge-m3) to
# EXTRAS; the versions are pyproject.toml's pins, which hadolint cannot see.
# hadolint ignore=DL3013
RUN set -eux; \
    extras="$EXTRAS"; \
    if [ "$VARIANT" = gpu ]; then extras="gpu${extras:+,$extras}"; fi; \
    pip install ".${extras:+[$extras]}"
# The embedding model's ONNX graphs, exported and quantized once here rather than by
# every container's first start (docs/cli.md, toolgraph prepare).
ENV TOOLGRAPH_RETRIEVER__ONNX_DIR=/opt/toolgraph/onnx
RUN toolgraph prepare

# ---------------------------------------------------------------- runtime bases
FROM py AS runtime-cpu

FROM ${CUDA_IMAGE} AS runtime-gpu
# The interpreter the venv was built with, at the same path; these are the
# shared libraries it links against.
COPY --from=py /usr/local /usr/local
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates libbz2-1.0 libexpat1 libffi8 liblzma5 libsqlite3-0 libssl3t64 \
        libuuid1 tzdata zlib1g \
    && rm -rf /var/lib/apt/lists/* \
    && ldconfig \
    && python3.11 --version
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# ---------------------------------------------------------------- final
# hadolint ignore=DL3006
FROM runtime-${VARIANT} AS final
ARG VARIANT
ARG MODELS_DIR=deploy/models
LABEL org.opencontainers.image.title="toolgraph" \
      org.opencontainers.image.description="OpenAI-compatible proxy that finds, plans and runs the tools a chat request needs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      dev.toolgraph.variant="${VARIANT}"
RUN groupadd --system --gid 10001 toolgraph \
    && useradd --system --uid 10001 --gid toolgraph --home-dir /var/lib/toolgraph \
        --shell /usr/sbin/nologin toolgraph \
    && mkdir -p /var/lib/toolgraph /opt/toolgraph/models \
    && chown toolgraph:toolgraph /var/lib/toolgraph
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/toolgraph/onnx /opt/toolgraph/onnx
COPY deploy/healthcheck.py /opt/toolgraph/healthcheck.py
COPY ${MODELS_DIR}/ /opt/toolgraph/models/
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HOME=/opt/toolgraph/models \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOOLGRAPH_HOST=0.0.0.0 \
    TOOLGRAPH_PORT=8000 \
    TOOLGRAPH_DATA_DIR=/var/lib/toolgraph \
    TOOLGRAPH_RETRIEVER__ONNX_DIR=/opt/toolgraph/onnx
USER 10001:10001
WORKDIR /var/lib/toolgraph
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/opt/toolgraph/healthcheck.py"]
ENTRYPOINT ["toolgraph"]
CMD ["serve"]
