"""Layer 7: notebooks (build, check), the headless runner, quizzes, checkers, reference runs,
recipes, leaderboard. Imports techniques and below.
"""
