"""onnx_node_cases.py - writes the installed onnx package's node test cases.

Debian's libonnx-testdata is ONNX 1.12's node suite; the onnx package in the
.venv generates the current one (opsets up to its newest) from
onnx.backend.test.case.node.collect_testcases().  This writes every case in
the backend-test layout the conformance runner reads, as onnx's own
backend/test/cmd_tools.py does: OUT/NAME/model.onnx and
OUT/NAME/test_data_set_K/{input,output}_J.pb.  Only tensor values are
written: a case with a sequence, map or optional input or output keeps its
model and gets no data set, so the runner reports the model's refusal.

OUT/.stamp records the onnx version and this script's digest; a folder
already written by the same pair is kept (the cases take a minute).

usage: python onnx_node_cases.py OUT   (exit 77: onnx is not installed)
"""
import hashlib
import os
import shutil
import sys
import warnings

try:
    import onnx
    import onnx.backend.test.case.node as node_cases
    from onnx import TensorProto, numpy_helper
except ImportError as e:  # ctest reports the conformance tests as skipped
    print("skipped: %s (scripts/setup.sh installs onnx into the .venv)" % e)
    sys.exit(77)


def tensor_proto(value, name):
    if isinstance(value, TensorProto):
        return value
    return numpy_helper.from_array(value, name)


def write_case(out, case):
    folder = os.path.join(out, case.name)
    os.makedirs(folder)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    if not all(v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output)):
        return
    for k, (inputs, outputs) in enumerate(case.data_sets):
        data_set = os.path.join(folder, "test_data_set_%d" % k)
        os.makedirs(data_set)
        for prefix, values, infos in (("input", inputs, graph.input),
                                      ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                with open(os.path.join(data_set, "%s_%d.pb" % (prefix, j)), "wb") as f:
                    f.write(tensor_proto(value, infos[j].name).SerializeToString())


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    stamp = os.path.join(out, ".stamp")
    with open(__file__, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    want = "onnx %s, onnx_node_cases.py %s\n" % (onnx.__version__, digest)
    if os.path.exists(stamp) and open(stamp).read() == want:
        print("%s: already written from %s" % (out, want.strip()))
        return 0
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with warnings.catch_warnings():  # the generators' own overflow warnings
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()
    for case in cases:
        write_case(out, case)
    with open(stamp, "w") as f:
        f.write(want)
    print("%s: %d node cases from %s" % (out, len(cases), want.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
