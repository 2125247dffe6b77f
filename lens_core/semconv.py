"""Attribute and metric names lens emits: the one place they are spelled (stdlib only)."""

__all__ = [
    "CODE_FILE_PATH",
    "CODE_FUNCTION_NAME",
    "CODE_LINE_NUMBER",
    "EFFICIENCY_METRIC_PREFIX",
    "GEN_AI_CLIENT_OPERATION_DURATION",
    "GEN_AI_CLIENT_TOKEN_USAGE",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_TOKEN_TYPE",
    "GYM_ROLLOUT_DURATION",
    "GYM_SERVERS_ACTIVE",
    "GYM_SERVER_REQUEST_DURATION",
    "GYM_VERIFY_COUNT",
    "GYM_VERIFY_DURATION",
    "GYM_VERIFY_OUTCOME",
    "GYM_VERIFY_SUCCESS_RATE",
    "HOST_NAME",
    "INIT_TOTAL_METRIC",
    "K8S_CONTAINER_NAME",
    "K8S_JOB_NAME",
    "K8S_NAMESPACE_NAME",
    "K8S_NODE_NAME",
    "K8S_POD_NAME",
    "K8S_POD_UID",
    "LENS_DEVICE_END_TIME",
    "LENS_DEVICE_INDEX",
    "LENS_DEVICE_START_TIME",
    "LENS_DEVICE_UNTIMED",
    "LENS_EXPORT_RESTARTS",
    "LENS_FIELDS_INVALID",
    "LENS_GOODPUT_RATIO",
    "LENS_GOODPUT_STEP_BUCKET_TIME",
    "LENS_GOODPUT_STEP_CURRENT",
    "LENS_GOODPUT_STEP_DURATION",
    "LENS_GOODPUT_STEP_TIME",
    "LENS_GOODPUT_TIME",
    "LENS_GROUP",
    "LENS_LOSS_SPAN_NAME",
    "LENS_SPANS_CREATED",
    "LENS_SPANS_DROPPED",
    "LENS_SPANS_FAILED",
    "LENS_SPANS_INVALID",
    "LENS_SPANS_REPLAYED",
    "LENS_SPANS_SPOOLED",
    "LENS_SPANS_TRUNCATED",
    "LENS_SPANS_UNENDED",
    "LENS_SPAN_CLAMPED",
    "LENS_SPAN_TRUNCATED",
    "LENS_SPOOL_TORN",
    "LENS_TELEMETRY_FINAL",
    "LENS_TRUNCATED_KEYS",
    "LENS_TRUNCATION_REASON",
    "LENS_UMBRELLA",
    "NEMO_PRECISION",
    "NEMO_RUN_ID",
    "NV_DL_CAMPAIGN_STAGE",
    "NV_DL_JOB_UUID",
    "NV_DL_LOCAL_RANK",
    "NV_DL_PROVIDER_NAME",
    "NV_DL_RANK",
    "NV_DL_RUN_UUID",
    "NV_DL_SOFTWARE",
    "NV_DL_TOPOLOGY_SIZE",
    "NV_DL_TRAINING_CONFIG",
    "NV_DL_TRAINING_LOSS",
    "NV_DL_TRAINING_SAMPLES_THROUGHPUT",
    "NV_DL_TRAINING_STEP_DURATION",
    "NV_DL_TRAINING_TARGET",
    "NV_DL_TRAINING_TOKENS_THROUGHPUT",
    "NV_DL_USER",
    "NV_DL_WORLD_SIZE",
    "NV_GPU_COUNT",
    "NV_GPU_INDEX",
    "NV_GPU_MEMORY_ALLOCATED",
    "NV_GPU_MEMORY_RESERVED",
    "NV_GPU_MEMORY_TOTAL",
    "NV_GPU_NAME",
    "NV_GPU_UUID",
    "PROCESS_PID",
    "PROCESS_RUNTIME_NAME",
    "PROCESS_RUNTIME_VERSION",
    "RAY_CLUSTER_SOURCES",
    "RL_ALGORITHM",
    "RL_BACKEND",
    "RL_BUCKET",
    "RL_CRITIC_EPOCHS",
    "RL_DATA_PLANE_BYTES",
    "RL_DATA_PLANE_KEYS",
    "RL_DATA_PLANE_OP",
    "RL_DATA_PLANE_PARTITION",
    "RL_DATA_PLANE_STATUS",
    "RL_EFFICIENCY_CATEGORY",
    "RL_EFFICIENCY_MEASUREMENT",
    "RL_ENTROPY",
    "RL_EPOCH",
    "RL_GENERATION_DURATION",
    "RL_GRAD_NORM",
    "RL_GYM_BATCH_SIZE",
    "RL_IDLE_POLLS",
    "RL_ITERATION",
    "RL_KL",
    "RL_LEARNING_RATE",
    "RL_MODEL",
    "RL_NUM_GENERATIONS_PER_PROMPT",
    "RL_NUM_PROMPT_GROUPS",
    "RL_POLICY_LOSS",
    "RL_PPO_EPOCH",
    "RL_RAY_CLUSTER_SOURCE",
    "RL_RESPONSE_LENGTH",
    "RL_RESPONSE_MEAN_LENGTH",
    "RL_REWARD_MEAN",
    "RL_ROLLOUT_ATTEMPT",
    "RL_ROLLOUT_DURATION",
    "RL_SETUP_DURATION",
    "RL_SETUP_PHASE",
    "RL_TARGET_STEP",
    "RL_TARGET_WEIGHT_VERSION",
    "RL_TOKENS_THROUGHPUT",
    "RL_VALUE_LOSS",
    "RL_WEIGHT_VERSION",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "SERVICE_INSTANCE_ID",
    "SERVICE_NAME",
    "SERVICE_VERSION",
    "SETUP_PHASE_TOTAL",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_CLUSTER",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_NODES",
    "SLURM_NTASKS",
    "SLURM_PARTITION",
    "SLURM_RESTART_COUNT",
    "TELEMETRY_DISTRO_NAME",
    "TELEMETRY_DISTRO_VERSION",
    "THREAD_ID",
    "THREAD_NAME",
]

# ---- span attributes stamped by lens itself ----------------------------------------------
RL_BUCKET = "rl.bucket"  # goodput bucket: productive / overhead / idle / wasted
LENS_SPAN_TRUNCATED = "lens.span.truncated"  # the span was cut short (e.g. at shutdown)
# keys whose text the file exporter cut to fit its value cap (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, else 1 MiB)
LENS_TRUNCATED_KEYS = "lens.truncated_keys"
LENS_SPAN_CLAMPED = "lens.span.clamped"  # an explicit interval had start > end; made zero-length
LENS_TRUNCATION_REASON = "lens.truncation.reason"  # on the truncation event: why (e.g. shutdown)
LENS_GROUP = "lens.group"  # the span group that gated the span (absent on ungated spans)
LENS_UMBRELLA = "lens.umbrella"  # true on umbrella spans (which never carry a bucket)
# device-timed spans (docs/guide/gpu-timing.md): when the device reached the span's start and end,
# in Unix ns on the same clock as the span's own start and end (mapped through anchor events),
# and which device (its index on the host). Absent on host-only spans.
LENS_DEVICE_START_TIME = "lens.device.start_time_unix_nano"
LENS_DEVICE_END_TIME = "lens.device.end_time_unix_nano"
LENS_DEVICE_INDEX = "lens.device.index"

# ---- loss records: what a process could not deliver, written into its own output ----------
# Each exporting process writes a zero-length root span named LENS_LOSS_SPAN_NAME whenever
# its counters have changed since the last one it wrote (and at shutdown). The counters
# are cumulative for the process, so the newest record (the largest counts) supersedes
# the earlier ones; the process is the record's resource (service.instance.id). A record
# is telemetry about telemetry: never counted among the process's spans. The record written at
# shutdown carries LENS_TELEMETRY_FINAL: a process whose output has none ended without shutting
# telemetry down (killed, os._exit) or is still running, and what it held is counted nowhere.
LENS_LOSS_SPAN_NAME = "lens.telemetry.loss"
LENS_SPANS_CREATED = "lens.spans.created"  # spans started (and sampled) so far
LENS_SPANS_DROPPED = "lens.spans.dropped"  # lost: the buffer or queue was full
LENS_SPANS_FAILED = "lens.spans.failed"  # lost: an export failed (collector gone, disk full)
LENS_SPANS_UNENDED = "lens.spans.unended"  # lost: never ended (evicted from the bounded open-span ledger), or not delivered by the end
LENS_SPANS_TRUNCATED = "lens.spans.truncated"  # not lost: still open at shutdown, ended there and marked
LENS_TELEMETRY_FINAL = "lens.telemetry.final"  # true on the record written when the process's telemetry shut down
LENS_SPANS_SPOOLED = "lens.spans.spooled"  # not lost: in the disk spool, not yet delivered (the next process of the run or `lens replay` sends them)
LENS_SPANS_REPLAYED = "lens.spans.replayed"  # other (ended) processes' spooled spans this process delivered
LENS_SPANS_INVALID = "lens.spans.invalid"  # of the failed: spans that could not be encoded (bad input), each dropped alone
LENS_FIELDS_INVALID = "lens.fields.invalid"  # bad values (a name, a timestamp, a status, a link) dropped or replaced; their spans kept
LENS_SPOOL_TORN = "lens.spool.torn"  # spool records skipped for a torn tail or a bad checksum (a crash mid-write)
LENS_EXPORT_RESTARTS = "lens.export.restarts"  # export threads that died and were replaced
LENS_DEVICE_UNTIMED = "lens.device.untimed"  # device-timed spans exported host-only (event pool empty, device not done by the deadline)

# ---- RL span tags (categorical: "which one?", not "how much?") --------------------------
RL_ITERATION = "rl.iteration"  # 1-based training step across the whole run
RL_EPOCH = "rl.epoch"
RL_WEIGHT_VERSION = "rl.weight_version"
RL_TARGET_WEIGHT_VERSION = "rl.target_weight_version"
RL_NUM_PROMPT_GROUPS = "rl.num_prompt_groups"
RL_NUM_GENERATIONS_PER_PROMPT = "rl.num_generations_per_prompt"
RL_IDLE_POLLS = "rl.idle.polls"
RL_EFFICIENCY_CATEGORY = "rl.efficiency.category"
RL_ROLLOUT_ATTEMPT = "rl.rollout.attempt"
RL_TARGET_STEP = "rl.target_step"
RL_GYM_BATCH_SIZE = "rl.gym.batch_size"
RL_CRITIC_EPOCHS = "rl.critic_epochs"
RL_PPO_EPOCH = "rl.ppo_epoch"
RL_BACKEND = "rl.backend"
RL_DATA_PLANE_OP = "rl.data_plane.op"
RL_DATA_PLANE_PARTITION = "rl.data_plane.partition"
RL_DATA_PLANE_KEYS = "rl.data_plane.keys"
RL_DATA_PLANE_BYTES = "rl.data_plane.bytes"
RL_DATA_PLANE_STATUS = "rl.data_plane.status"  # ok / error / timeout
RL_RAY_CLUSTER_SOURCE = "rl.ray.cluster_source"  # on rl.setup.ray_init: one of RAY_CLUSTER_SOURCES
RAY_CLUSTER_SOURCES = ("attached_external", "reused_local", "started_local")

# ---- the declared schema: what these names mean, versioned ------------------------------
# The OpenTelemetry semantic-conventions release the standard names here follow; stamped as the
# schema_url of every resource and instrumentation scope lens creates.
SEMCONV_VERSION = "1.30.0"  # code.file.path / code.function.name / code.line.number are 1.30 names
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# ---- resource: OpenTelemetry standard ----------------------------------------------------
SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
SERVICE_INSTANCE_ID = "service.instance.id"
HOST_NAME = "host.name"
TELEMETRY_DISTRO_NAME = "telemetry.distro.name"  # the distribution that made the telemetry: lens
TELEMETRY_DISTRO_VERSION = "telemetry.distro.version"
PROCESS_PID = "process.pid"
THREAD_ID = "thread.id"  # span attribute: the thread that started the span
THREAD_NAME = "thread.name"
CODE_FILE_PATH = "code.file.path"  # log records: where the log call is
CODE_FUNCTION_NAME = "code.function.name"
CODE_LINE_NUMBER = "code.line.number"
PROCESS_RUNTIME_NAME = "process.runtime.name"
PROCESS_RUNTIME_VERSION = "process.runtime.version"

# ---- resource: the run and the rank ------------------------------------------------------
NEMO_RUN_ID = "nemo.run.id"  # correlates separate traces of one run
NEMO_PRECISION = "nemo.precision"
NV_DL_RANK = "nv.dl.rank"
NV_DL_WORLD_SIZE = "nv.dl.world_size"
NV_DL_LOCAL_RANK = "nv.dl.local_rank"
NV_DL_USER = "nv.dl.user"
NV_DL_JOB_UUID = "nv.dl.job.uuid"  # stable across restarts of one scheduler job
NV_DL_RUN_UUID = "nv.dl.run.uuid"  # new for every restart
NV_DL_CAMPAIGN_STAGE = "nv.dl.campaign.stage"  # SFT / RM / RL
NV_DL_PROVIDER_NAME = "nv.dl.provider.name"
RL_ALGORITHM = "rl.algorithm"
RL_MODEL = "rl.model"

# ---- resource: families filled from what the process can know ----------------------------
# Each family is a prefix; the key names a parallelism size, a package or a setting
# (nv.dl.topology.size.tensor_parallel, nv.dl.software.torch, nv.dl.training.config.micro_batch_size).
NV_DL_TOPOLOGY_SIZE = "nv.dl.topology.size."  # int sizes: world, nodes, local, tensor_parallel, ...
NV_DL_SOFTWARE = "nv.dl.software."  # str: installed package versions
NV_DL_TRAINING_CONFIG = "nv.dl.training.config."  # the run's settings (bool/int/float/str)
NV_DL_TRAINING_TARGET = "nv.dl.training.target."  # what the run aims at (steps, tokens, ...)

# ---- resource: the GPU this process drives -----------------------------------------------
NV_GPU_COUNT = "nv.gpu.count"  # devices visible to the process
NV_GPU_INDEX = "nv.gpu.index"  # physical (NVML) index
NV_GPU_UUID = "nv.gpu.uuid"
NV_GPU_NAME = "nv.gpu.name"
NV_GPU_MEMORY_TOTAL = "nv.gpu.memory.total"  # bytes

# ---- resource: SLURM ----------------------------------------------------------------------
SLURM_JOB_ID = "slurm.job.id"  # "<array job>_<task>" for array tasks
SLURM_JOB_NAME = "slurm.job.name"
SLURM_PARTITION = "slurm.partition"
SLURM_NODES = "slurm.nodes"  # node count (int)
SLURM_NTASKS = "slurm.ntasks"
SLURM_RESTART_COUNT = "slurm.restart_count"
SLURM_CLUSTER = "slurm.cluster"
SLURM_ARRAY_JOB_ID = "slurm.array.job_id"
SLURM_ARRAY_TASK_ID = "slurm.array.task_id"

# ---- resource: Kubernetes (OpenTelemetry standard names) ---------------------------------
K8S_NAMESPACE_NAME = "k8s.namespace.name"
K8S_POD_NAME = "k8s.pod.name"
K8S_POD_UID = "k8s.pod.uid"
K8S_NODE_NAME = "k8s.node.name"
K8S_CONTAINER_NAME = "k8s.container.name"
K8S_JOB_NAME = "k8s.job.name"

# ---- GenAI (OpenTelemetry semantic conventions) ------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"  # input / output
GEN_AI_CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"  # metric, s
GEN_AI_CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"  # metric, {token}

# ---- metrics: RL training -----------------------------------------------------------------
RL_REWARD_MEAN = "rl.reward.mean"
RL_KL = "rl.kl"
RL_POLICY_LOSS = "rl.policy.loss"
RL_VALUE_LOSS = "rl.value.loss"
RL_ENTROPY = "rl.entropy"
RL_GRAD_NORM = "rl.grad_norm"
RL_LEARNING_RATE = "rl.learning_rate"
RL_TOKENS_THROUGHPUT = "rl.throughput.tokens"  # {token}/s
RL_GENERATION_DURATION = "rl.generation.duration"  # s
RL_ROLLOUT_DURATION = "rl.rollout.duration"  # s
RL_RESPONSE_LENGTH = "rl.response.length"  # {token}, histogram: one value per response
RL_RESPONSE_MEAN_LENGTH = "rl.response.mean_length"  # {token}, gauge: the batch mean

# ---- metrics: efficiency timers and startup ------------------------------------------------
EFFICIENCY_METRIC_PREFIX = "efficiency/"  # + category: efficiency/idle/validation, s
# attribute of efficiency/*: how it was measured (driver_wall_clock, collector_wall_clock, thread_seconds)
RL_EFFICIENCY_MEASUREMENT = "rl.efficiency.measurement"
INIT_TOTAL_METRIC = "init/total"  # s, the initial replay-buffer fill (bucket overhead)
RL_SETUP_DURATION = "rl.setup.duration"  # s, one startup phase; phase=total_setup is the flat total
RL_SETUP_PHASE = "phase"  # attribute of rl.setup.duration: ray_init, tokenizer, ..., total_setup
SETUP_PHASE_TOTAL = "total_setup"

# ---- metrics: live goodput (each exporting rank, at every step end) -----------------------
# Bounded cardinality: one series per rank (per bucket), never per step; the step is a value.
LENS_GOODPUT_TIME = "lens.goodput.time"  # s, counter: bucketed seconds so far, by rl.bucket
LENS_GOODPUT_STEP_TIME = "lens.goodput.step.time"  # s, counter: steps' wall time so far
LENS_GOODPUT_RATIO = "lens.goodput.ratio"  # 1, gauge: productive seconds / the rank's wall time so far
LENS_GOODPUT_STEP_DURATION = "lens.goodput.step.duration"  # s, gauge: the last step's wall time
LENS_GOODPUT_STEP_CURRENT = "lens.goodput.step.current"  # {step}, gauge: the last step ended
LENS_GOODPUT_STEP_BUCKET_TIME = "lens.goodput.step.bucket_time"  # s, gauge: the last step's seconds, by rl.bucket

# ---- metrics: Gym environment servers ------------------------------------------------------
GYM_ROLLOUT_DURATION = "gym.rollout.duration"  # s, one rollout (an agent server's /run)
GYM_VERIFY_DURATION = "gym.verify.duration"  # s, one verification
GYM_VERIFY_COUNT = "gym.verify.count"  # {verification}, counter split by GYM_VERIFY_OUTCOME
GYM_VERIFY_OUTCOME = "gym.verify.outcome"  # attribute: success / failure
GYM_VERIFY_SUCCESS_RATE = "gym.verify.success_rate"  # 1, gauge: the caller's success fraction
GYM_SERVERS_ACTIVE = "gym.servers.active"  # {server}, up-down counter summed across processes
GYM_SERVER_REQUEST_DURATION = "gym.server.request.duration"  # s, one request a Gym server answered

# ---- metrics: training steps --------------------------------------------------------------
NV_DL_TRAINING_STEP_DURATION = "nv.dl.training.step.duration"  # s
NV_DL_TRAINING_LOSS = "nv.dl.training.loss"
NV_DL_TRAINING_SAMPLES_THROUGHPUT = "nv.dl.training.throughput.samples"  # {sample}/s
NV_DL_TRAINING_TOKENS_THROUGHPUT = "nv.dl.training.throughput.tokens"  # {token}/s
NV_GPU_MEMORY_ALLOCATED = "nv.gpu.memory.allocated"  # By, held by tensors
NV_GPU_MEMORY_RESERVED = "nv.gpu.memory.reserved"  # By, held by the caching allocator
