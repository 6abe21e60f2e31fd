"""The engine: attention, layer norm, projections, multi-head, the delta rule, fused passes, backends."""
