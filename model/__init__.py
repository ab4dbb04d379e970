"""System-level wafer model: topologies, flow-level network simulation, collectives, training."""
