"""The framework-free core: graph building, clean-up passes and the writer."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from rml_export import Graph, ValueType, clean_up, save


def test_transpose_chain_and_constant_fold(tmp_path):
    g = Graph()
    x = g.add_input("x", "F32", ["N", 4])
    w = g.add_constant(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    (wt,) = g.add_node("transpose", [w], {"perm": [1, 0]}, types=[ValueType("F32", [4, 3])])
    (y,) = g.add_node("matmul", [x, wt], {"transpose_a": False}, name="mm",
                      types=[ValueType("F32", ["N", 3])])
    (a,) = g.add_node("transpose", [y], {"perm": [1, 0]}, types=[ValueType("F32", [3, "N"])])
    (b,) = g.add_node("transpose", [a], {"perm": [1, 0]}, types=[ValueType("F32", ["N", 3])])
    (out,) = g.add_node("relu", [b], outputs=["y"], types=[ValueType("F32", ["N", 3])])
    g.add_output(out)
    clean_up(g)
    assert [n.op for n in g.nodes] == ["matmul", "relu"]
    assert g.nodes[0].attrs == {}
    (const,) = g.constants.values()
    np.testing.assert_array_equal(const, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    path = save(g, tmp_path / "graph.json", weights_file="weights.safetensors")
    doc = json.loads(path.read_text())
    assert doc["outputs"] == [{"name": "y", "dtype": "F32", "shape": ["N", 3]}]
    assert set(load_file(tmp_path / "weights.safetensors")) == set(g.constants)


def test_identity_before_output_keeps_the_output_name():
    g = Graph()
    x = g.add_input("x", "F32", [2])
    (h,) = g.add_node("exp", [x], types=[ValueType("F32", [2])])
    (y,) = g.add_node("identity", [h], outputs=["y"], types=[ValueType("F32", [2])])
    g.add_output(y)
    clean_up(g)
    assert [(n.op, n.outputs) for n in g.nodes] == [("exp", ["y"])]


def test_duplicate_constants_share_one_name():
    g = Graph()
    x = g.add_input("x", "F32", [2])
    c1 = g.add_constant(np.ones(2, np.float32), "c")
    c2 = g.add_constant(np.ones(2, np.float32), "c")
    (a,) = g.add_node("add", [x, c1], types=[ValueType("F32", [2])])
    (b,) = g.add_node("mul", [a, c2], outputs=["y"], types=[ValueType("F32", [2])])
    g.add_output(b)
    clean_up(g)
    assert len(g.constants) == 1
    assert g.nodes[0].inputs[1] == g.nodes[1].inputs[1]


def test_undeclared_output_type_is_an_error(tmp_path):
    g = Graph()
    x = g.add_input("x", "F32", [2])
    (y,) = g.add_node("exp", [x])
    g.add_output(y)
    with pytest.raises(ValueError, match="dtype and shape are unknown"):
        save(g, tmp_path / "g.json")
