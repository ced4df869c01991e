"""Fixtures the Go test TestPythonPackage (cmd/warehouse-etl) builds: warehouses built by
the CLI and the Go reader's values for them. Every expected value comes from Go, never
from the code under test. Run the suite with

    go test ./cmd/warehouse-etl -run TestPythonPackage -v

Without WAREHOUSE_ETL_TESTDATA the tests that need a warehouse skip.
"""
import json
import os
import unittest

import numpy as np

DATA = os.environ.get("WAREHOUSE_ETL_TESTDATA")
REPO = os.environ.get("WAREHOUSE_ETL_REPO", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
EXPECT_U8 = os.environ.get("WAREHOUSE_ETL_EXPECT_U8") == "1"
#: The harness built the package's compiled part (warehouse_etl._copycrc) for these tests.
EXPECT_COPYCRC = os.environ.get("WAREHOUSE_ETL_EXPECT_COPYCRC") == "1"
#: The directory holding the warehouse_etl under test (a copy with its compiled part, under
#: go test): what a subprocess puts on PYTHONPATH to run the same package.
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def need_data(test):
    if not DATA:
        test.skipTest("no WAREHOUSE_ETL_TESTDATA: run via go test ./cmd/warehouse-etl -run TestPythonPackage")


def fixtures():
    with open(os.path.join(DATA, "fixtures.json")) as f:
        return {x["name"]: x for x in json.load(f)}


def fixture(test, name):
    need_data(test)
    fx = fixtures()
    if name not in fx:
        if name == "u8" and EXPECT_U8:
            test.fail("the u8 warehouse was built but is not among the fixtures")
        test.skipTest(f"no {name} warehouse (the CLI does not build it yet)")
    return fx[name]


class Reference:
    """The Go reader's values of one warehouse, as raw arrays."""

    def __init__(self, fx, image_dtype, box_dtype, image_shape, max_boxes, extra_f32):
        ref, n = fx["ref"], fx["samples"]
        read = lambda name, dt: np.fromfile(os.path.join(ref, name), dtype=dt)
        self.images = read("images.bin", image_dtype).reshape((n,) + tuple(image_shape))
        self.boxes = read("boxes.bin", box_dtype).reshape(n, max_boxes, 4)
        self.mask = read("mask.bin", box_dtype).reshape(n, max_boxes)
        self.class_index = read("class_index.bin", "<i4").reshape(n, max_boxes)
        self.box_count = read("box_count.bin", "<i4")
        self.extras = read("extras.bin", "<f4").reshape(n, extra_f32)
        with open(os.path.join(ref, "meta.jsonl")) as f:
            self.meta = [json.loads(line) for line in f]
        with open(os.path.join(ref, "plans.json")) as f:
            self.plans = json.load(f)


def raw(a):
    """The bytes of an array, for exact (bitwise) comparison."""
    return np.ascontiguousarray(a).tobytes()


def load_damaged():
    with open(os.path.join(DATA, "damaged.json")) as f:
        return json.load(f)


def load_unchecked():
    """An older warehouse (shards without checksum sections) made by the Go test from
    the first fixture: ``original``, ``path``, ``flipped`` (a flipped image byte in
    sample ``sample``)."""
    with open(os.path.join(DATA, "unchecked.json")) as f:
        return json.load(f)


__all__ = ["DATA", "REPO", "EXPECT_U8", "EXPECT_COPYCRC", "PACKAGE", "need_data", "fixtures", "fixture", "Reference", "raw", "load_damaged",
           "load_unchecked", "unittest"]
