"""Ready-made Gym metrics: rollout, verification and server-request durations, verify outcomes, servers."""

from lens_core import semconv

from otel_bridge.instruments.registry import SECONDS_BOUNDARIES, MetricSpec

__all__ = ["GROUP", "SPECS"]

GROUP = "gym"
"""The metric group name to pass to ``record_metrics``."""

# A Gym server answers quick requests (ms) and whole rollouts (minutes) on the same routes.
_REQUEST_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000)
_VERIFICATIONS = "Verifications, by outcome (gym.verify.outcome)."

SPECS = (
    MetricSpec("rollout_duration", semconv.GYM_ROLLOUT_DURATION, "histogram", "s",
               "Duration of one rollout.", boundaries=SECONDS_BOUNDARIES),
    MetricSpec("verify_duration", semconv.GYM_VERIFY_DURATION, "histogram", "s",
               "Duration of one verification.", boundaries=SECONDS_BOUNDARIES),
    MetricSpec("verify_succeeded", semconv.GYM_VERIFY_COUNT, "counter", "{verification}", _VERIFICATIONS,
               attributes={semconv.GYM_VERIFY_OUTCOME: "success"}),
    MetricSpec("verify_failed", semconv.GYM_VERIFY_COUNT, "counter", "{verification}", _VERIFICATIONS,
               attributes={semconv.GYM_VERIFY_OUTCOME: "failure"}),
    MetricSpec("verify_success_rate", semconv.GYM_VERIFY_SUCCESS_RATE, "gauge", "1",
               "Fraction of verifications that succeeded, over a window the caller chooses."),
    MetricSpec("servers_active", semconv.GYM_SERVERS_ACTIVE, "up_down_counter", "{server}",
               "Gym servers running: +1 when one starts, -1 when it stops (summed across processes)."),
    MetricSpec("server_request_duration", semconv.GYM_SERVER_REQUEST_DURATION, "histogram", "s",
               "Duration of one request a Gym server answered.", boundaries=_REQUEST_SECONDS),
)
"""Keys: rollout_duration, verify_duration (s); verify_succeeded, verify_failed (one counter,
by outcome); verify_success_rate; servers_active (+1 / -1); server_request_duration (s)."""
