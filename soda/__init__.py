"""soda: an autonomous coding daemon that loops Sense -> Orient -> Decide -> Act."""

__version__ = "0.1.0"
