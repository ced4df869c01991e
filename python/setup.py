"""The package's one compiled part, warehouse_etl._copycrc (a copy and its CRC-32C in one
pass), is optional: where no C compiler or Python headers are found, pip installs the package
without it and the reader copies and checks in two passes (``warehouse_etl._crc32c.COPY_CRC``
is None). The rest of the metadata is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("warehouse_etl._copycrc", ["warehouse_etl/_copycrc.c"], optional=True)])
