// Placeholder until this target has code.
