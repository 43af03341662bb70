"""soda's effectiveness benchmark (bench/effectiveness/run.py): soda on a suite of
small tasks, judged by acceptance tests it never sees."""
