"""The wire contract and the Redis transport every adaserve part imports."""

from adaserve.broker.clock import ServerClock
from adaserve.broker.codec import decode, encode, peek, unpack, validate
from adaserve.broker.connection import connect
from adaserve.broker.errors import (
    AdaserveError,
    BrokerUnavailable,
    BuildError,
    ConfigError,
    DataError,
    DeviceUnavailable,
    EmbeddedServerError,
    InputError,
    InvalidArgument,
    InvalidMessage,
    JobTimeout,
    LimitExceeded,
    ModelLoadError,
    ModelNotFound,
    ServerUnsupported,
)
from adaserve.broker.events import EVENT_TYPES, Event
from adaserve.broker.finalize import Ending, Finalizer, Packed
from adaserve.broker.keys import PLANNER_GROUP, Keys
from adaserve.broker.messages import (
    SCHEMA_VERSION,
    Batch,
    BatchItem,
    Generation,
    Job,
    Placement,
    Plan,
    Request,
    Result,
    Slo,
    Timings,
)
from adaserve.broker.outage import Outage, is_transient, ride_out
from adaserve.broker.probe import ServerInfo, probe
from adaserve.broker.settings import Limits, Settings, load_connected_settings, load_limits, load_settings
from adaserve.broker.tensors import Tensor

__all__ = [
    "EVENT_TYPES",
    "PLANNER_GROUP",
    "SCHEMA_VERSION",
    "AdaserveError",
    "Batch",
    "BatchItem",
    "BrokerUnavailable",
    "BuildError",
    "ConfigError",
    "DataError",
    "DeviceUnavailable",
    "EmbeddedServerError",
    "Ending",
    "Event",
    "Finalizer",
    "Generation",
    "InputError",
    "InvalidArgument",
    "InvalidMessage",
    "Job",
    "JobTimeout",
    "Keys",
    "LimitExceeded",
    "Limits",
    "ModelLoadError",
    "ModelNotFound",
    "Outage",
    "Packed",
    "Placement",
    "Plan",
    "Request",
    "Result",
    "ServerClock",
    "ServerInfo",
    "ServerUnsupported",
    "Settings",
    "Slo",
    "Tensor",
    "Timings",
    "connect",
    "decode",
    "encode",
    "is_transient",
    "load_connected_settings",
    "load_limits",
    "load_settings",
    "peek",
    "probe",
    "ride_out",
    "unpack",
    "validate",
]
