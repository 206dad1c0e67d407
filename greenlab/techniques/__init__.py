"""Layer 6: one module per lesson topic (its docstring names the lesson); lm/ for lessons 10, 12 and 11.
Imports training, experiments and below.
"""
