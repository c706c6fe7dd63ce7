"""bench.provenance: canonical JSON, protocol hashes, the run.json header."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.provenance import canonical_json, protocol_hash, run_header


def test_canonical_json_is_order_and_type_insensitive_and_rejects_nan():
    a = {"b": (1, np.float64(2.5)), "a": {"y": np.int64(1), "x": [True]}}
    b = {"a": {"x": [True], "y": 1}, "b": [1, 2.5]}
    assert canonical_json(a) == canonical_json(b) == '{"a":{"x":[true],"y":1},"b":[1,2.5]}'
    assert protocol_hash(a) == protocol_hash(b) and len(protocol_hash(a)) == 64
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


def test_run_header_names_the_run_and_hashes_its_protocol(tmp_path):
    protocol = {"kind": "neural", "seed": 2}
    header = run_header(kind="neural", identity={"dataset": "d", "fold": "F", "method": "m", "seed": np.int64(2)},
                        config={"loss": "ranknet"}, device_requested="auto", protocol=protocol,
                        fingerprint="f" * 64, prepared_dir=tmp_path)
    assert (header["dataset"], header["fold"], header["method"], header["seed"]) == ("d", "F", "m", 2)
    assert header["protocol_hash"] == protocol_hash(protocol)
    assert header["config"] == {"loss": "ranknet", "device_requested": "auto"}
    assert header["prepared_dir"] == str(tmp_path.resolve()) and "ltr-bench" in header["versions"]
