"""The kernel puzzles' solutions and planted mistakes: kept out of nnlib's wheel and out of
everything students receive (nnlib.exercises.puzzles holds the checks, the references and the
budgets)."""
