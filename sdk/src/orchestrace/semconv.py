"""Every attribute, span-event and value name orchestrace uses: :mod:`orchestrace_semconv` (the small
distribution the SDK, the integrations and the collector share), under the SDK's name."""

from orchestrace_semconv import *  # noqa: F403
