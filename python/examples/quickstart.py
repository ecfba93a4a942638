"""eagle from Python: arrays shared with numpy, a recorded graph, bind, reverse mode, planning.

Runs on the CPU, and on the GPU too when one is there; checks its own results (run by the
Python tests, and excerpted in the README)."""

import numpy as np

import eagle

K = eagle.kernels


def run(device):
    rng = np.random.default_rng(0)
    # [readme:py-arrays]
    x = rng.standard_normal(1024).astype(np.float32)
    a = eagle.asarray(x)                 # shares numpy's memory (DLPack), no copy
    b = eagle.asarray(x, device=device)  # a copy when the device differs
    back = np.from_dlpack(a)             # and back, no copy: any DLPack consumer (torch, cupy)
    # [/readme]
    assert back.ctypes.data == x.ctypes.data and b.device == device

    # [readme:py-record]
    w = rng.standard_normal(1024).astype(np.float32)

    def step(r):  # runs once, with a recorder: kernel calls become nodes
        y = K.mul(r.param("x", b), r.param("w", eagle.asarray(w, device=device)))
        r.result(K.axpy(y, y, 0.5))  # 0.5 * y + y

    g = eagle.Graph.record(step).build()  # a CUDA graph on a GPU, a host schedule on the CPU
    out = g()                             # one launch and a wait; the graph's own array
    g.bind(w=eagle.asarray(2 * w, device=device))  # patched in place, nothing recorded again
    out2 = g()
    # [/readme]
    np.testing.assert_allclose(out.numpy(), 1.5 * 2 * x * w, rtol=1e-5)  # out is out2's array
    np.testing.assert_allclose(out2.numpy(), 1.5 * 2 * x * w, rtol=1e-5)

    # [readme:py-reverse]
    def loss(r):
        y = K.mul(r.param("x", b), r.param("w", eagle.asarray(w, device=device)))
        r.result(K.sum(K.mul(y, y)))

    forward = eagle.Graph.record(loss, record=True).build()
    backward = eagle.diff.reverse(forward, "result", ["w"])  # a graph of derivative kernels
    forward()
    dw = backward()  # d sum((x w)^2) / dw = 2 x^2 w
    # [/readme]
    np.testing.assert_allclose(dw.numpy(), 2 * x * x * w, rtol=1e-4)

    # [readme:py-plan]
    og = eagle.op.Graph("gelu_of_product")
    tx = og.tensor("x", (1024,))
    tw = og.tensor("w", (1024,))
    ty = og.pointwise("gelu", og.pointwise("mul", tx, tw)).set_output(True).set_name("y")
    plans = eagle.plan(og, device)  # the one ranked plan list over every engine
    print(plans.describe())
    plans.build_plans()             # the first entry that builds
    y = eagle.empty((1024,), eagle.f32, device)
    stream = eagle.Stream(device)   # or torch's: eagle.Stream.borrow(device, handle)
    plans.execute({"x": b, "w": eagle.asarray(w, device=device), "y": y}, stream)
    stream.synchronize()            # execute issues the work and returns
    # [/readme]
    want = x * w
    want = 0.5 * want * (1 + np.vectorize(__import__("math").erf)(want / np.sqrt(2)))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    run(eagle.cpu)
    if eagle.cuda_available():
        run(eagle.Device("cuda:0"))
    print("quickstart: ok")
