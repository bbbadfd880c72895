# One Dockerfile, two images; compose.yaml picks the command of each service.
#   FLAVOUR=cpu (default): torch from PyTorch's CPU wheel index and onnxruntime (CPU): no CUDA
#     libraries, for the planner, the CPU workers, the exporter and the producer.
#   FLAVOUR=gpu: torch with its CUDA wheels and onnxruntime-gpu, as pyproject.toml states them;
#     only the GPU worker needs it.
FROM python:3.11-slim
ARG FLAVOUR=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    ADASERVE_DATA_DIR=/data
WORKDIR /app
# Dependencies first, in their own layer: a code change does not reinstall torch.
COPY pyproject.toml ./
COPY deploy/requirements.py deploy/requirements.py
RUN python deploy/requirements.py "$FLAVOUR" > /tmp/requirements.txt \
 && if [ "$FLAVOUR" = cpu ]; then pip install --index-url "$TORCH_INDEX_URL" "torch==2.13.*"; fi \
 && pip install -r /tmp/requirements.txt
COPY setup.py README.md ./
COPY adaserve adaserve
COPY broker broker
COPY producers producers
COPY planner planner
COPY workers workers
COPY telemetry telemetry
COPY models models
COPY bench bench
COPY workload workload
COPY profiling profiling
COPY loadgen loadgen
RUN pip install --no-deps .
VOLUME /data
ENTRYPOINT ["adaserve"]
CMD ["--help"]
