"""Layer 3: what this machine has and runs natively (hardware), which device (devices), and
gl.setup / gl.budget / quick mode (config). Imports base, energy, impact.
"""
