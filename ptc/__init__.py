"""ptc: programmatic tool calling for agent hosts."""
