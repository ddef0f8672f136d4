"""The IPU architecture a profile's target sizes imply (shared by the readers that know tiles and clocks)."""

from __future__ import annotations


def infer_arch(tiles_per_ipu: int | None, bytes_per_tile: int | None, clock_hz: float | None) -> str | None:
    """The IPU architecture when the target sizes say it unambiguously (reference facts, section 6)."""

    def near(value: float | None, ref: float) -> bool:
        return value is not None and abs(value - ref) <= 0.03 * ref

    if tiles_per_ipu == 1216 and bytes_per_tile in (None, 262_144):
        return "ipu1"
    if tiles_per_ipu is None and bytes_per_tile == 262_144:
        return "ipu1"
    if (
        tiles_per_ipu in (None, 1472)
        and bytes_per_tile in (None, 638_976)
        and (tiles_per_ipu or bytes_per_tile)
    ):
        if near(clock_hz, 1.33e9):
            return "ipu2"
        if near(clock_hz, 1.85e9):
            return "bow"
    return None
