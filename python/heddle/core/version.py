"""heddle's version (part of every cache and tuning key)."""
__version__ = "0.1.0"
