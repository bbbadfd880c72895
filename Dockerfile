# One image for every adaserve service; compose.yaml picks the command.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    ADASERVE_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
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
RUN pip install .
VOLUME /data
ENTRYPOINT ["adaserve"]
CMD ["--help"]
