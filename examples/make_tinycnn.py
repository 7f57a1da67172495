#!/usr/bin/env python3
"""Export the bundled example model (examples/tinycnn) through the bridge: a small residual
CNN classifier with seeded weights, the kind of network bpcc's quantization flow is for.
Run with Debian's /usr/bin/python3; the files it writes are committed."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import bpcc_torch  # noqa: E402


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + x)


class TinyCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(16), nn.ReLU())
        self.block1 = Block(16)
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(32), nn.ReLU())
        self.block2 = Block(32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        y = self.block2(self.down(self.block1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(y), 1))


def main():
    torch.manual_seed(0)
    model = TinyCNN()
    # give the batch norms non-trivial statistics, as a trained network has
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
    model.eval()
    bpcc_torch.export(model, (torch.randn(1, 3, 32, 32),), os.path.join(HERE, "tinycnn", "tinycnn.bpcc"))


if __name__ == "__main__":
    main()
