"""The errors of the Python reader: one for a warehouse it must not trust or cannot
read, and its subclass for a recorded validation summary over a ``fail`` threshold.
Both are importable from ``warehouse_etl`` itself."""


class WarehouseError(ValueError):
    """A warehouse this reader must not trust, or cannot read. The message names the
    file at fault and words the cause as the Go reader does."""


class ThresholdError(WarehouseError):
    """The warehouse's recorded validation summary exceeds a threshold with action
    ``fail``. ``findings`` lists each exceeded limit (dicts with ``threshold``,
    ``value``, ``count``, ``total``, ``limit``, ``action``)."""

    def __init__(self, message, findings):
        super().__init__(message)
        self.findings = findings


__all__ = ["WarehouseError", "ThresholdError"]
