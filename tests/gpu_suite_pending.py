"""Experiments a lesson already reads with ``gl.reference.show`` that ``benchmarks/gpu_suite.py``
does not record yet, each with the lesson it belongs to. The lesson shows the record as missing
until the suite records it; the tests then fail until the name is removed from here."""

NOT_RECORDED_YET: dict = {"whole_bill": "16"}
