"""Layer 6: one module per lesson topic (its docstring names the lesson); lm/ for lessons 10, 11 and 15.
Imports training, experiments and below.
"""
