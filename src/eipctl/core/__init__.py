"""Pure logic: pool math, placement, naming, resource types. No I/O, no clocks, no clients."""
