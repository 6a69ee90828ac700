#!/usr/bin/env python3
"""Session 28's probe (not an engine feature): a T = 1600 Neuron Inverter
checkpoint from a T = 800 one, every parameter copied, and the two
resolution-dependent ones -- the first FC layer's weight [512, 180 x L] and
the flat BN's vectors [180 x L] -- resampled along the position axis L
(11 -> 24), dense position l taken at coarse position (l - 0.625) / 2 (the
two conv stacks' windows centred on the same input time), linearly
interpolated and clamped; the FC weight scaled by 11/24 so that a sum over 24
positions has the size of the coarse sum over 11.
mode 'fresh' instead keeps the template's freshly initialised FC1 and flat BN.

  make_checkpoint.py COARSE.h5 TEMPLATE_T1600.h5 OUT.h5 interp|fresh
"""
import shutil
import sys

import h5py
import numpy as np

src, tmpl, out, mode = sys.argv[1:5]
shutil.copy(tmpl, out)
C, Lc, Ld = 180, 11, 24
pos = np.clip((np.arange(Ld) - 0.625) / 2.0, 0, Lc - 1)
m0 = np.floor(pos).astype(int)
m1 = np.minimum(m0 + 1, Lc - 1)
w = pos - m0


def resample(a):  # last axis Lc -> Ld
    return a[..., m0] * (1 - w) + a[..., m1] * w


with h5py.File(src, "r") as c, h5py.File(out, "r+") as d:
    for k in c["model"].keys():
        a = c["model"][k][()]
        if k == "fc_block.0.weight":
            if mode == "interp":
                d["model"][k][...] = (resample(a.reshape(512, C, Lc)) * (Lc / Ld)).reshape(512, C * Ld)
            continue
        if k.startswith("flat_bn.") and k != "flat_bn.num_batches_tracked":
            if mode == "interp":
                d["model"][k][...] = resample(a.reshape(C, Lc)).reshape(C * Ld)
            continue
        d["model"][k][...] = a
