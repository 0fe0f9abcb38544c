"""What this machine's CPU computes in, for tests whose subject needs it (asked only when such a test runs)."""

from __future__ import annotations

import pytest


def require_bf16() -> None:
    """Skip the calling test unless OpenVINO's CPU plugin computes in bf16 here (AVX-512 BF16 or AMX); elsewhere a
    bf16 precision is refused in one line (tests/models/test_openvino_backend.py checks that)."""
    pytest.importorskip("openvino")
    from embedscope.models.openvino_backend import cpu_capabilities

    if "BF16" not in cpu_capabilities():
        pytest.skip(f"this CPU computes no bf16 (OpenVINO's CPU capabilities: {', '.join(cpu_capabilities())})")
