"""Core value objects: budgets, neighbouring relations, errors, validation, randomness."""
