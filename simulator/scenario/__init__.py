"""The scenario language: the model, durations, the YAML loader with file:line errors, validation, the JSON Schema."""
