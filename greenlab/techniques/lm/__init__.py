"""Lessons 10, 11 and 15 (part of layer 6, techniques): a small language model, compile, serving, LoRA,
sharding.
"""
