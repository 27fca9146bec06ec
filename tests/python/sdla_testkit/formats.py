"""The test kit uses the package's NumPy implementation of the I/O formats (independent of the C++)."""
from softdla.formats import *  # noqa: F401,F403
from softdla.formats import CHW16, CHW32, DLA_HWC4, DLA_LINEAR, LINEAR, descriptor, layout, pack, unpack  # noqa: F401
