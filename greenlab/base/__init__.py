"""Layer 1 (the bottom): argument checks, units, cited-table reading, folders, atomic files and
file locks, the results log, optional packages. Imports no other greenlab package.
"""
