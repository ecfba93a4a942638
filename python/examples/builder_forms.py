"""Every form of ``@eagle.Graph.builder`` on one page: Python conditions decided once, device
conditions (one-cell u32 arrays) decided at every launch, loops, a switch, a fork. Each graph is
built, run, re-bound and checked (run by the Python tests, and excerpted in the README)."""

import numpy as np

import eagle

K = eagle.kernels


def main(device):
    def cell(v):  # a one-cell u32 array on the device: a device condition
        return eagle.asarray(np.full(1, v, np.uint32), device=device)

    x_host = np.random.default_rng(0).uniform(0.5, 1.5, 8)
    x = eagle.asarray(x_host, device=device)

    # [readme:py-builder-if]
    @eagle.Graph.builder
    def branch(x, c, debug):
        y = K.copy(x)
        if debug:          # a Python value: decided once, now; only one path is recorded
            print("recording", y)
        if c:              # a one-cell u32 array: both arms recorded, the device decides
            y = K.scale(y, 2.0)   # a rebound name keeps one array across the construct
        else:
            y = K.scale(y, -3.0)
        return y

    g = branch(x, cell(1), debug=False)   # records, builds on the arguments' device
    twice = g().numpy().copy()
    g.bind(c=cell(0))                     # the other arm, nothing recorded again
    # [/readme]
    np.testing.assert_allclose(twice, 2 * x_host)
    np.testing.assert_allclose(g().numpy(), -3 * x_host)

    # [readme:py-builder-loops]
    @eagle.Graph.builder
    def loops(x, n, k):
        r = eagle.current_recorder()
        stop = K.fill(0, buffer=r.empty((1,), eagle.u32))
        remaining = K.copy(n)
        y = K.copy(x)
        for _ in range(10):             # a capped loop: at most 10 turns, on the device
            y = K.scale(y, 2.0)
            going, remaining = K.loop_next(remaining, stop)
            if not going:               # break / continue guard the rest of the body
                break
        match k:                        # a switch on a cell
            case 0:
                y = K.scale(y, 10.0)
            case 1 | 2:
                y = K.scale(y, -1.0)
        return y

    g = loops(x, cell(3), cell(0))      # 2^3, then * 10
    # [/readme]
    np.testing.assert_allclose(g().numpy(), 80 * x_host)
    g.bind(n=cell(50), k=cell(2))       # the cap of 10 ends the loop
    np.testing.assert_allclose(g().numpy(), -1024 * x_host)

    # [readme:py-builder-while]
    @eagle.Graph.builder
    def until(x, stop_at):
        r = eagle.current_recorder()
        acc = K.copy(x)
        turns = K.fill(0, buffer=r.empty((1,), eagle.u32, "turns"))
        done = K.equal_mask(turns, stop_at, buffer=r.empty((1,), eagle.u32, "done"))
        while not done:                 # a loop node; the condition is recomputed each turn
            acc = K.add(acc, x)
            K.cell_increment(turns, buffer=turns)
            K.equal_mask(turns, stop_at, buffer=done)
        return acc
    # [/readme]

    g = until(x, cell(4))
    np.testing.assert_allclose(g().numpy(), 5 * x_host)

    # [readme:py-builder-fork]
    @eagle.Graph.builder
    def fork(x):
        with eagle.parallel() as (b1, b2):
            with b1:
                y1 = K.scale(x, 2.0)
            with b2:
                b2.wait(y1)             # one ordering edge; otherwise branches run concurrently
                y2 = K.add(y1, x)
        return y2
    # [/readme]

    np.testing.assert_allclose(fork(x)().numpy(), 3 * x_host)

    # [readme:py-builder-errors]
    @eagle.Graph.builder
    def wrong(x, c):
        y = K.copy(x)
        return [y for _ in range(2) if c]   # a device condition Python would have to test

    try:
        wrong(x, cell(1))
    except eagle.BuildError as e:           # names the file and line
        print(e)
    # [/readme]
    else:
        raise AssertionError("a device condition in a comprehension was recorded")


if __name__ == "__main__":
    main(eagle.cpu)
    if eagle.cuda_available():
        main(eagle.Device("cuda:0"))
    print("builder_forms: ok")
