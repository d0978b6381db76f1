"""CATCH (ICLR 2025): channel-aware anomaly detection by frequency patching, built from the
workbook's kernels. ``CATCH`` is the detector; ``metrics`` and ``baselines`` evaluate it.

Taught in notebooks/07_catch.
"""

from .detector import CATCH, DEFAULTS, check_series
from .model import CATCHNet
from .model import _Block as TransformerBlock

__all__ = ["CATCH", "CATCHNet", "DEFAULTS", "TransformerBlock", "check_series"]
