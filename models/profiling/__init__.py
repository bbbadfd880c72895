"""The offline profiler: latency, quality and execution-time profiles, run as rq jobs."""
