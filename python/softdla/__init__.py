"""softdla: an open cuDLA runtime with a software DLA. `softdla.cudla` mirrors cuda.bindings.cudla."""
__version__ = "0.1.0"
