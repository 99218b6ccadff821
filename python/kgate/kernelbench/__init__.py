"""The KernelBench-format adapter: a task (ref_code: Model, get_inputs, get_init_inputs, module-level size
constants) and a candidate (custom_code: ModelNew), checked gate by gate with the candidate in a worker
process. Framework specifics (torch on the GPU, numpy on the CPU for CI) live in fw_torch / fw_numpy."""
