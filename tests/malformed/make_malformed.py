#!/usr/bin/env python3
"""Writes the malformed-input corpus into tests/malformed/files/.

Every file is small and its name says what is wrong with it.  fxcc must
refuse each one with a clean "fxcc: error: ..." line and exit status 1: no
crash, no sanitizer report, no huge allocation.  run_malformed.sh feeds them
through `fxcc inspect` and `fxcc run`.  Models that need companion files
(external data) are folders holding model.onnx.

The output is deterministic: running the script twice writes the same bytes.
Needs the `onnx` and `numpy` Python packages (only to write the corpus).

    python3 tests/malformed/make_malformed.py [OUT_DIR]
"""
import os
import shutil
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")


def write(name, data):
    path = os.path.join(OUT, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def model_bytes(nodes, inputs, outputs, initializers=(), opset=13, ir_version=7, domains=()):
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(initializers))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=imports, producer_name="make_malformed")
    m.ir_version = ir_version
    return m.SerializeToString()


def f32_input(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def raw_tensor(name, dims, data_type=TensorProto.FLOAT, raw=b""):
    t = TensorProto()
    t.name = name
    t.dims.extend(dims)
    t.data_type = data_type
    t.raw_data = raw
    return t


def relu_model(**kw):
    return model_bytes([helper.make_node("Relu", ["x"], ["y"])], [f32_input("x", [2, 3])],
                       [f32_input("y", [2, 3])], **kw)


def add_weight_model(weight):
    """y = x + w with w an initializer (the usual carrier for bad tensors)."""
    return model_bytes([helper.make_node("Add", ["x", weight.name], ["y"])],
                       [f32_input("x", [2, 2])], [f32_input("y", [2, 2])], [weight])


def external_model(location, offset=None, length=None):
    w = TensorProto()
    w.name = "w"
    w.dims.extend([2, 2])
    w.data_type = TensorProto.FLOAT
    w.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = w.external_data.add()
        e.key = k
        e.value = v
    return add_weight_model(w)


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def npy_bytes(header, data=b"", version=1):
    header = header.encode("latin1")
    prefix = 10 if version == 1 else 12
    pad = (-(prefix + len(header) + 1)) % 64
    header += b" " * pad + b"\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)

    # --- protobuf-level damage --------------------------------------------
    good = add_weight_model(helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4]))
    write("truncated_model_half.onnx", good[: len(good) // 2])
    write("truncated_model_last_byte.onnx", good[:-1])
    write("empty_file.onnx", b"")
    write("not_protobuf_text.onnx", b"this is not an ONNX model\n")
    # ir_version (field 1, varint) whose varint never ends
    write("corrupted_varint_ir_version.onnx", b"\x08" + b"\xff" * 12 + good[2:])
    # a length prefix far beyond the end of the file
    write("length_beyond_file.onnx", b"\x08\x07" + varint(7 << 3 | 2) + varint(1 << 40) + b"\x00")
    write("invalid_wire_type.onnx", b"\x08\x07\x3f\x00")
    # Model.graph > Graph.node > Node.attribute > Attribute.g > Graph.node ... 400 levels
    nested = b""
    for _ in range(400):
        nested = field(1, field(5, field(6, nested)))  # Graph.node(1) > Node.attribute(5) > Attr.g(6)
    write("deep_nesting_400_levels.onnx", b"\x08\x07" + field(7, nested))
    # 2000 empty NodeProto entries: cheap on disk, costly once decoded
    write("thousands_of_empty_nodes.onnx", b"\x08\x07" + field(7, field(1, b"") * 2000) +
          field(8, b"\x0a\x00\x10\x0d"))

    # --- versions ----------------------------------------------------------
    write("opset_0.onnx", relu_model(opset=0))
    write("opset_99.onnx", relu_model(opset=99))
    write("ir_version_2.onnx", relu_model(ir_version=2))
    write("ir_version_99.onnx", relu_model(ir_version=99))
    m = onnx.load_from_string(relu_model())
    del m.opset_import[:]
    write("no_default_opset_import.onnx", m.SerializeToString())
    m = onnx.load_from_string(relu_model())
    m.ClearField("graph")
    write("no_graph.onnx", m.SerializeToString())

    # --- tensors -----------------------------------------------------------
    write("huge_dims_initializer_1e12_elements.onnx",
          add_weight_model(raw_tensor("w", [1000000, 1000000], raw=b"\0" * 16)))
    write("overflowing_dims_initializer.onnx",
          add_weight_model(raw_tensor("w", [1 << 62, 1 << 62, 16], raw=b"\0" * 16)))
    write("raw_data_shorter_than_dims.onnx",
          add_weight_model(raw_tensor("w", [4, 4], raw=b"\0" * 12)))
    write("raw_data_longer_than_dims.onnx",
          add_weight_model(raw_tensor("w", [2, 2], raw=b"\0" * 20)))
    write("negative_dims_initializer.onnx",
          add_weight_model(raw_tensor("w", [-1, 4], raw=b"\0" * 16)))
    write("rank_100_initializer.onnx", add_weight_model(raw_tensor("w", [1] * 100, raw=b"\0" * 4)))
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([2, 2])
    t.float_data.extend([1.0, 2.0, 3.0])
    write("float_data_count_mismatch.onnx", add_weight_model(t))
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.INT64
    t.dims.extend([2, 2])
    t.float_data.extend([1.0, 2.0, 3.0, 4.0])
    write("typed_field_wrong_for_dtype.onnx", add_weight_model(t))
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.INT8
    t.dims.extend([2])
    t.int32_data.extend([1, 1000])
    write("int8_value_out_of_range.onnx", add_weight_model(t))
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([2, 2])
    write("initializer_without_data.onnx", add_weight_model(t))
    write("initializer_data_type_undefined.onnx",
          add_weight_model(raw_tensor("w", [2, 2], data_type=0, raw=b"\0" * 16)))
    write("initializer_data_type_999.onnx",
          add_weight_model(raw_tensor("w", [2, 2], data_type=999, raw=b"\0" * 16)))
    write("string_initializer.onnx",
          add_weight_model(helper.make_tensor("w", TensorProto.STRING, [1], [b"abc"])))

    # --- external data: must stay inside the model's folder ----------------
    write("external_data_dotdot/model.onnx", external_model("../../etc/passwd"))
    write("external_data_absolute_path/model.onnx", external_model("/etc/passwd"))
    write("external_data_missing_file/model.onnx", external_model("weights.bin"))
    write("external_data_beyond_file/model.onnx", external_model("weights.bin", 8, 16))
    write("external_data_beyond_file/weights.bin", b"\0" * 16)
    write("external_data_length_mismatch/model.onnx", external_model("weights.bin", 0, 8))
    write("external_data_length_mismatch/weights.bin", b"\0" * 16)
    write("external_data_bad_offset/model.onnx", external_model("weights.bin", "-5", 16))
    write("external_data_bad_offset/weights.bin", b"\0" * 16)
    write("external_data_symlink_outside/model.onnx", external_model("weights.bin"))
    os.symlink("/etc/passwd", os.path.join(OUT, "external_data_symlink_outside", "weights.bin"))
    write("external_data_is_directory/model.onnx", external_model("sub"))
    os.makedirs(os.path.join(OUT, "external_data_is_directory", "sub", "keep"))
    write("external_data_is_directory/sub/keep/.keep", b"")

    # --- graph inputs ------------------------------------------------------
    write("negative_dims_input.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])], [f32_input("x", [2, -3])], [f32_input("y", [2, 3])]))
    write("rank_100_input.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])], [f32_input("x", [1] * 100)], [f32_input("y", None)]))
    write("unknown_rank_input.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])], [f32_input("x", None)], [f32_input("y", None)]))
    write("input_without_type.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])], [helper.make_empty_tensor_value_info("x")],
        [f32_input("y", None)]))
    write("sequence_input.onnx", model_bytes(
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])], [f32_input("y", None)]))
    write("duplicate_graph_input.onnx", model_bytes(
        [helper.make_node("Add", ["x", "x"], ["y"])], [f32_input("x", [2]), f32_input("x", [2])],
        [f32_input("y", [2])]))

    # --- nodes -------------------------------------------------------------
    write("unknown_op.onnx", model_bytes(
        [helper.make_node("FrobnicateTensor", ["x"], ["y"])], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("custom_domain_op.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"], domain="com.example")], [f32_input("x", [2])],
        [f32_input("y", [2])], domains=["com.example"]))
    write("many_unsupported_ops.onnx", model_bytes(
        [helper.make_node("NonZero", ["x"], ["a"]),
         helper.make_node("Unique", ["x"], ["b"]),
         helper.make_node("FrobnicateTensor", ["x"], ["c"]),
         helper.make_node("LabelEncoder", ["x"], ["d"], domain="ai.onnx.ml")],
        [f32_input("x", [2])], [f32_input("a", None)], domains=["ai.onnx.ml"]))
    # an If decided at run time whose branches give different shapes
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [f32_input("t", [2])])
    else_g = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else", [],
                               [f32_input("e", [4])])
    write("control_flow_if.onnx", model_bytes(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), f32_input("x", [2])],
        [f32_input("y", [2])]))
    write("node_input_not_defined.onnx", model_bytes(
        [helper.make_node("Relu", ["nope"], ["y"])], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("nodes_out_of_order.onnx", model_bytes(
        [helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Neg", ["x"], ["a"])],
        [f32_input("x", [2])], [f32_input("y", [2])]))
    write("nodes_cycle.onnx", model_bytes(
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
        [f32_input("x", [2])], [f32_input("b", [2])]))
    write("node_self_loop.onnx", model_bytes(
        [helper.make_node("Add", ["x", "y"], ["y"])], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("value_defined_twice.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
        [f32_input("x", [2])], [f32_input("y", [2])]))
    write("node_output_shadows_input.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["x"])], [f32_input("x", [2])], [f32_input("x", [2])]))
    write("graph_output_not_defined.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])], [f32_input("x", [2])], [f32_input("z", [2])]))
    write("no_graph_outputs.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])], [f32_input("x", [2])], []))
    write("node_without_op_type.onnx", model_bytes(
        [helper.make_node("", ["x"], ["y"])], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("too_many_node_inputs.onnx", model_bytes(
        [helper.make_node("Relu", ["x", "x", "x"], ["y"])], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("missing_required_input.onnx", model_bytes(
        [helper.make_node("Add", ["x"], ["y"])], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("unknown_attribute.onnx", model_bytes(
        [helper.make_node("Relu", ["x"], ["y"], frobnication=3)], [f32_input("x", [2])],
        [f32_input("y", [2])]))
    node = helper.make_node("Relu", ["x"], ["y"])
    a = node.attribute.add()
    a.name = "alpha"
    write("attribute_without_type.onnx", model_bytes([node], [f32_input("x", [2])], [f32_input("y", [2])]))
    write("constant_without_value.onnx", model_bytes(
        [helper.make_node("Constant", [], ["y"])], [], [f32_input("y", [2])]))
    write("constant_huge_dims.onnx", model_bytes(
        [helper.make_node("Constant", [], ["y"], value=raw_tensor("v", [1 << 20, 1 << 20], raw=b"\0" * 4))],
        [], [f32_input("y", None)]))
    write("constant_string_value.onnx", model_bytes(
        [helper.make_node("Constant", [], ["y"], value_string="abc")], [], [f32_input("y", None)]))
    write("constant_external_escape.onnx", model_bytes(
        [helper.make_node("Constant", [], ["y"], value=onnx.load_from_string(
            external_model("../../etc/passwd")).graph.initializer[0])], [], [f32_input("y", None)]))

    # --- .npy tensors --------------------------------------------------------
    data = np.arange(6, dtype="<f4").tobytes()
    write("npy_bad_magic.npy", b"\x93NUMPX\x01\x00" + npy_bytes("{}")[8:])
    write("npy_bad_header_dict.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1, }", data))
    write("npy_header_not_a_dict.npy", npy_bytes("hello world", data))
    write("npy_unterminated_string.npy", npy_bytes("{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", data))
    write("npy_huge_shape_1e12.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", data))
    write("npy_overflowing_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }", data))
    write("npy_shape_beyond_int64.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, ), }", data))
    write("npy_negative_dim.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 6), }", data))
    write("npy_rank_9.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6), }", data))
    write("npy_truncated_data.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data[:-3]))
    write("npy_trailing_data.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data + b"\0" * 4))
    write("npy_fortran_order.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data))
    write("npy_big_endian.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", data))
    write("npy_object_dtype.npy", npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", data))
    write("npy_float16.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", data[:6]))
    write("npy_missing_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", data))
    write("npy_version_9.npy", b"\x93NUMPY\x09\x00" + npy_bytes("{}")[8:])
    full = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data)
    write("npy_header_length_beyond_file.npy", full[:8] + struct.pack("<H", 60000) + full[10:])
    write("npy_truncated_in_prefix.npy", full[:9])
    write("npy_v2_header_length_4gib.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{}")

    # --- .pb tensors ---------------------------------------------------------
    good_pb = helper.make_tensor("x", TensorProto.FLOAT, [2, 3], list(range(6))).SerializeToString()
    write("pb_truncated.pb", good_pb[: len(good_pb) - 5])
    write("pb_not_protobuf.pb", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
    write("pb_raw_data_short.pb", raw_tensor("x", [2, 3], raw=b"\0" * 20).SerializeToString())
    write("pb_huge_dims_1e12.pb", raw_tensor("x", [1000000, 1000000], raw=b"\0" * 24).SerializeToString())
    write("pb_negative_dims.pb", raw_tensor("x", [2, -3], raw=b"\0" * 24).SerializeToString())
    write("pb_rank_100.pb", raw_tensor("x", [1] * 100, raw=b"\0" * 4).SerializeToString())
    write("pb_external_data.pb", onnx.load_from_string(external_model("/etc/passwd")).graph.initializer[0].SerializeToString())
    write("pb_no_data_type.pb", raw_tensor("x", [2, 3], data_type=0, raw=b"\0" * 24).SerializeToString())
    write("pb_string_tensor.pb", helper.make_tensor("x", TensorProto.STRING, [1], [b"abc"]).SerializeToString())


if __name__ == "__main__":
    main()
