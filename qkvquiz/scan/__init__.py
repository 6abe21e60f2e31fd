"""Paper coming back: scanned worksheets read into the submissions the answer form writes.

``read_scans(read_cellmap(path), files)`` (or :func:`read_pages` over page images) gives each
student's submission, the confidence of every reading, and what became of every page. The
cell map is data beside the key; nothing here imports rendering. See ``docs/scanning.md``.
"""

from .cellmap import CellMap, CellMapError, read_cellmap, write_cellmap
from .reader import PageReport, ScanResult, read_pages, read_scans

__all__ = ["CellMap", "CellMapError", "PageReport", "ScanResult", "read_cellmap", "read_pages", "read_scans",
           "write_cellmap"]
