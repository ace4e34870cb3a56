"""The example `make run` differentiates: plain Python with a loop, a branch and a call."""
import math

import numpy as np

import bytegrad


def smooth_abs(v):
    return math.sqrt(v * v + 1e-3)


def loss(x, target):
    total = 0.0
    for i in range(len(x) - 1):
        step = x[i + 1] - x[i] ** 2
        if step > 0:
            total += step * step
        else:
            total += 0.5 * smooth_abs(step)
    return total + (x[0] - target) ** 2


if __name__ == "__main__":
    x = np.array([0.5, -1.0, 2.0, 0.25])
    value, (dx, dtarget) = bytegrad.value_and_gradient(loss, x, 1.0)
    print(f"loss(x, 1.0) = {value}")
    print(f"d loss / d x      = {dx}")
    print(f"d loss / d target = {dtarget}")
