"""A small todo list kept in a JSON file."""
