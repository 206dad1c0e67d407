"""The GPU suite behind ``benchmarks/gpu_suite.py`` (the documented command), along its seams:

- ``settings``: experiments, time plan, targets, work sizes;
- ``orchestrator``: provenance, the plan, the watchdog over one subprocess per experiment and
  lesson, the bundle of records, ``--unpack``;
- ``worker``: one process running experiments;
- ``context``: the measurement context (calibrated energy windows, the training loop);
- ``probes``: NVML queries (read-only) and the measurement-core checks;
- ``records``: JSON files and the reference schema's rows;
- ``experiments``: one module per lesson's experiment.
"""
