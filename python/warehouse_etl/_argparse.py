"""What tools that read a warehouse share: the ``--tensor-warehouse`` flag and the
command that builds the demo warehouse, which they print when they cannot find one."""

#: How a user builds the demo warehouse; printed by tools that cannot find one.
BUILD_COMMAND = "go run ./cmd/warehouse-etl build --config configs/demo.jsonc"


def add_argument(parser, *, required=False, help=None):
    """Add ``--tensor-warehouse PATH`` (dest ``tensor_warehouse``) to an argparse parser and
    return the action. Tools pass the value to :func:`warehouse_etl.open`."""
    return parser.add_argument(
        "--tensor-warehouse", metavar="PATH", dest="tensor_warehouse", required=required,
        help=help or ("warehouse version directory, an output root with a `latest` pointer, or "
                      "s3://BUCKET/PREFIX[/v<id>|/latest-<config>] (docs/format/s3.md) "
                      f"(build one with: {BUILD_COMMAND})"))


__all__ = ["BUILD_COMMAND", "add_argument"]
