"""Layer 2b: carbon intensity and CO2e, scheduling, cost-benefit of scaling out, statements.
Imports base (and energy) only.
"""
