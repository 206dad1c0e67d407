"""Lessons 10-11 (part of layer 6, techniques): a small language model, compile, serving, LoRA,
sharding.
"""
