"""The schedule IR: lowering from a spec, binding to a matrix and device, CPU simulation."""

from teaal_loops.ir.bind import bind, index_bits
from teaal_loops.ir.lower import lower, recognise_spmv
from teaal_loops.ir.model import (
    BoundSchedule,
    Combine,
    DeviceInfo,
    GpuLevel,
    Launch,
    MatrixShape,
    RankBinding,
    RowTiling,
    Schedule,
    ScheduleKind,
)
from teaal_loops.ir.ownership import thread_of_space_stamp
from teaal_loops.ir.simulate import LoadBalance, SimResult, owners, simulate

__all__ = [
    "BoundSchedule",
    "Combine",
    "DeviceInfo",
    "GpuLevel",
    "Launch",
    "LoadBalance",
    "MatrixShape",
    "RankBinding",
    "RowTiling",
    "Schedule",
    "ScheduleKind",
    "SimResult",
    "bind",
    "index_bits",
    "lower",
    "owners",
    "recognise_spmv",
    "simulate",
    "thread_of_space_stamp",
]
