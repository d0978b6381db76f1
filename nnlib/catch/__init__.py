"""CATCH (ICLR 2025): channel-aware anomaly detection by frequency patching, built from the
workbook's kernels. ``CATCH`` is the detector; ``metrics`` and ``baselines`` evaluate it.

Taught in notebooks/07_catch.
"""

from .detector import CATCH, DEFAULTS, TINY, check_series
from .model import CATCHNet, TransformerBlock

__all__ = ["CATCH", "CATCHNet", "DEFAULTS", "TINY", "TransformerBlock", "check_series"]
