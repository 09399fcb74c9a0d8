"""From a parsed spec to a schedule and back to numbers: lowering (choosing the layout and the
schedule definition), the CPU simulation over a layout's tile view, and ``explain``.

This layer sits on the schedule and layout definitions and iterates over them; it never names
a schedule or a layout itself.
"""

from teaal_loops.lowering.explain import bound_json, explain_text, schedule_json
from teaal_loops.lowering.lower import lower
from teaal_loops.lowering.simulate import (
    LoadBalance,
    SimResult,
    load_balance,
    owners,
    schedule_shape,
    simulate,
    simulate_view,
    thread_of_space_stamp,
)

__all__ = [
    "LoadBalance",
    "SimResult",
    "bound_json",
    "explain_text",
    "load_balance",
    "lower",
    "owners",
    "schedule_json",
    "schedule_shape",
    "simulate",
    "simulate_view",
    "thread_of_space_stamp",
]
