"""`embedq bench backends` names the CPU's int8 instruction sets and measures fidelity."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from embedq.bench.backends import fidelity, int8_instruction_sets


def test_int8_instruction_sets_come_from_the_cpu_flags(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni amx_int8\n"
                       "processor\t: 1\nflags\t\t: fpu sse2 avx2 avx_vnni\n")
    assert int8_instruction_sets(cpuinfo) == [
        "avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"]
    assert int8_instruction_sets(tmp_path / "absent") == []


def test_fidelity_sees_a_perturbed_tier() -> None:
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((300, 32)).astype(np.float32)
    same = fidelity(reference, reference * 3)
    assert same["mean_cosine"] > 0.9999 and same["top10_overlap"] == 1.0
    noisy = fidelity(reference, reference + rng.standard_normal((300, 32)).astype(np.float32))
    assert noisy["mean_cosine"] < 0.8 and noisy["top10_overlap"] < 0.6
    assert noisy["p1_cosine"] <= noisy["mean_cosine"]
