# Names vulture reports as unused that are used where it cannot see: by a framework that looks
# them up by name, by another program, by the JSON outputs, or by the tests. CI runs
#     vulture gputop .ci/vulture_whitelist.py --min-confidence 60
# and a name listed here counts as used wherever it appears (vulture matches names, not places).
# A new finding is either dead (delete it) or belongs in a group below with its reason.
# Made with `vulture gputop --min-confidence 60 --make-whitelist`, then grouped by hand.
# Not Python to run or lint: pyproject.toml's ruff config excludes this file.

# ---- ui/panes.discovered finds the panes by walking its package ----
StacksPane
StepPane
RanksPane
VerdictPane
ChangePane

# ---- Textual looks these up by name ----
# the App/Screen/Widget class attributes it reads
CSS_PATH
TITLE
ENABLE_COMMAND_PALETTE
COMPONENT_CLASSES
_.display  # Widget.display: setting it shows or hides the widget
_.max_height  # Styles.max_height: the panes' box capped where the screen is short (ui/room.py)
_.sub_title  # Screen.sub_title: drawn in the header
# methods it calls: compose, on_<event>/on_<message>, overrides of its Widget and App
_.compose
_.on_resize
_.on_reading  # ui/messages.py Reading
_.on_source_trouble  # ui/messages.py SourceTrouble
_.on_capture_update  # ui/messages.py CaptureUpdate
_.get_theme_variable_defaults
_.get_content_height
container  # get_content_height's parameters, Textual's signature
viewport
_.render_line
# action_<name>: the BINDINGS of ui/app.py, ui/replay_app.py and ui/screens/load_agent.py name them
_.action_cancel_capture
_.action_capture_dump
_.action_capture_flame
_.action_capture_memory
_.action_capture_nsys
_.action_capture_trace
_.action_detail
_.action_dump_stacks
_.action_faster
_.action_help
_.action_interrupt
_.action_load_agent
_.action_next_gpu
_.action_next_theme
_.action_pause
_.action_prev_gpu
_.action_save_snapshot
_.action_slower
_.action_why
_.action_answer
_.action_seek
_.action_seek_end
_.action_seek_to
_.action_speed_down
_.action_speed_up

# ---- the standard library and other libraries read these ----
exc_type  # __exit__(self, exc_type, exc, tb): the context-manager protocol's parameters
exc
tb
_.__wrapped__  # functools' convention: inspect.unwrap and the tests find the original through it
_.argument_default  # argparse reads it when a subcommand's flags are added (commands/flags.py)
_.completer  # argcomplete reads an action's completer (commands/completion.py)
_.log_message  # http.server's BaseHTTPRequestHandler calls it (export/http_server.py)
_.handle_error  # socketserver calls it when a request raises (export/http_server.py)
daemon_threads  # socketserver.ThreadingMixIn reads it
request_queue_size  # socketserver.TCPServer reads it (the listen backlog)
_.collect  # prometheus_client calls a registered Collector's collect() per scrape

# ---- the simulated NVML library (sim/fakelib.py) ----
# pynvml finds the C entry points by name: FakeNvmlLib.exports() hands it getattr(self, symbol)
# for every symbol of the driver generation (sim/drivers.py); each method here is in one
_.nvmlInit_v2
_.nvmlDeviceGetBAR1MemoryInfo
_.nvmlDeviceGetComputeMode
_.nvmlDeviceGetCount_v2
_.nvmlDeviceGetCudaComputeCapability
_.nvmlDeviceGetDecoderUtilization
_.nvmlDeviceGetDeviceHandleFromMigDeviceHandle
_.nvmlDeviceGetDisplayActive
_.nvmlDeviceGetDisplayMode
_.nvmlDeviceGetDriverModel
_.nvmlDeviceGetEccMode
_.nvmlDeviceGetEncoderUtilization
_.nvmlDeviceGetFanSpeed
_.nvmlDeviceGetGraphicsRunningProcesses_v2
_.nvmlDeviceGetGraphicsRunningProcesses_v3
_.nvmlDeviceGetHandleByIndex_v2
_.nvmlDeviceGetHandleByPciBusId_v2
_.nvmlDeviceGetHandleByUUID
_.nvmlDeviceGetIndex
_.nvmlDeviceGetMemoryInfo_v2
_.nvmlDeviceGetMinorNumber
_.nvmlDeviceGetPciInfo_v3
_.nvmlDeviceGetPerformanceState
_.nvmlDeviceGetPersistenceMode
_.nvmlDeviceGetPowerManagementLimit
_.nvmlDeviceGetSerial
_.nvmlDeviceGetTotalEccErrors
_.nvmlDeviceIsMigDeviceHandle
# fields of pynvml's ctypes structs the fake fills in; NVML clients (nvitop, gpustat) read them
_.bar1Free
_.bar1Total
_.bar1Used
_.busIdLegacy
_.decUtil
_.encUtil
_.latencyUsec
_.temperature
_.valueType

# ---- model fields that only the JSON outputs read ----
# snapshot.jsonable and the report walk dataclasses.fields(), so every field is output; each
# of these is in gputop/schemas/*.schema.json and docs/snapshot.md, docs/diagnose.md or
# docs/report.md
parent_index  # model/gpu.py
max_graphics_clock_mhz
temp_mem_max_c
graphics_clock_mhz
mem_free_bytes
gpm_pcie_tx_mibps
gpm_pcie_rx_mibps
gpm_nvlink_tx_mibps
gpm_nvlink_rx_mibps
uss_bytes  # model/host.py
pss_bytes
ctx_voluntary_rate
ctx_involuntary_rate
cpu_quota_path
cpu_usage_cores
throttled_s_per_s
mem_limit_path
mem_current_bytes
mem_events
swap_bytes
dump_s  # model/stacks.py
hostname  # model/steps.py
heartbeat_age_s
agent_errors
precision_basis  # model/step_stats.py Mfu: diagnose --json and the report

# ---- read by the tests (and benches) only: the hooks and registers they check ----
STACK_PHASES  # vocab/stacks.py: tests/unit/sources/test_stack_phases.py holds the rules' phases to it
PRECISIONS  # model/step_stats.py: tests/unit/model/test_mfu.py holds every board's peaks to it
theme_from_toml  # ui/themes.py: a theme file's text -> Theme, the themes tests and fuzzing
FULL  # sim/activity.py: full load beside IDLE, tests/unit/sim/test_activity_model.py
_.release_hangs  # sim/board.py: the tests' hooks into the simulated board
_.set_power_limit
_.calls  # sim/board.py: NVML calls and the simulator's CPU time, for the benches and tests
_.sim_cpu_s
_.walks  # sources/proc_tree.py: /proc walks made, for tests/integration/test_procfs_processes.py and the bench
_.turned_away  # agent/server.py: connections refused past the bounds, test_agent_server_bounds
_.lagged
_.address  # export/prometheus.py: the port the exporter got, for the tests that scrape it
