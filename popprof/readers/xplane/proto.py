"""The XSpace protobuf messages, built at run time from a descriptor written here (no generated ``_pb2``).

Field names and numbers are those of ``xplane.proto`` (package ``tensorflow.profiler``) in
tensorflow/tensorflow, ``third_party/xla/third_party/tsl/tsl/profiler/protobuf/xplane.proto`` at commit
``6ee576304d65b94f7b645286fbd4df96a279f7fc`` (the same file is ``tsl/profiler/protobuf/xplane.proto`` in
openxla/xla). The ``protobuf`` library is imported only when a file is parsed; without it reading fails
with one line naming the extra to install.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ...model.errors import InputError

PACKAGE = "tensorflow.profiler"
INSTALL_HINT = "install the protobuf library: pip install 'popprof[xplane]'"

# protobuf's FieldDescriptorProto types and labels, by name (descriptor.proto's numbers)
_INT64, _UINT64, _DOUBLE, _STRING, _BYTES, _MESSAGE = 3, 4, 1, 9, 12, 11
_OPTIONAL, _REPEATED = 1, 3

#: message -> fields (name, number, type, label, message type or None, oneof index or None)
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None, int | None]]] = {
    "XSpace": [
        ("planes", 1, _MESSAGE, _REPEATED, "XPlane", None),
        ("errors", 2, _STRING, _REPEATED, None, None),
        ("warnings", 3, _STRING, _REPEATED, None, None),
        ("hostnames", 4, _STRING, _REPEATED, None, None),
    ],
    "XPlane": [
        ("id", 1, _INT64, _OPTIONAL, None, None),
        ("name", 2, _STRING, _OPTIONAL, None, None),
        ("lines", 3, _MESSAGE, _REPEATED, "XLine", None),
        ("event_metadata", 4, _MESSAGE, _REPEATED, "XPlane.EventMetadataEntry", None),
        ("stat_metadata", 5, _MESSAGE, _REPEATED, "XPlane.StatMetadataEntry", None),
        ("stats", 6, _MESSAGE, _REPEATED, "XStat", None),
    ],
    "XLine": [
        ("id", 1, _INT64, _OPTIONAL, None, None),
        ("display_id", 10, _INT64, _OPTIONAL, None, None),
        ("name", 2, _STRING, _OPTIONAL, None, None),
        ("display_name", 11, _STRING, _OPTIONAL, None, None),
        ("timestamp_ns", 3, _INT64, _OPTIONAL, None, None),
        ("duration_ps", 9, _INT64, _OPTIONAL, None, None),
        ("events", 4, _MESSAGE, _REPEATED, "XEvent", None),
    ],
    "XEvent": [
        ("metadata_id", 1, _INT64, _OPTIONAL, None, None),
        ("offset_ps", 2, _INT64, _OPTIONAL, None, 0),
        ("num_occurrences", 5, _INT64, _OPTIONAL, None, 0),
        ("duration_ps", 3, _INT64, _OPTIONAL, None, None),
        ("stats", 4, _MESSAGE, _REPEATED, "XStat", None),
    ],
    "XStat": [
        ("metadata_id", 1, _INT64, _OPTIONAL, None, None),
        ("double_value", 2, _DOUBLE, _OPTIONAL, None, 0),
        ("uint64_value", 3, _UINT64, _OPTIONAL, None, 0),
        ("int64_value", 4, _INT64, _OPTIONAL, None, 0),
        ("str_value", 5, _STRING, _OPTIONAL, None, 0),
        ("bytes_value", 6, _BYTES, _OPTIONAL, None, 0),
        ("ref_value", 7, _UINT64, _OPTIONAL, None, 0),
    ],
    "XEventMetadata": [
        ("id", 1, _INT64, _OPTIONAL, None, None),
        ("name", 2, _STRING, _OPTIONAL, None, None),
        ("display_name", 4, _STRING, _OPTIONAL, None, None),
        ("metadata", 3, _BYTES, _OPTIONAL, None, None),
        ("stats", 5, _MESSAGE, _REPEATED, "XStat", None),
        ("child_id", 6, _INT64, _REPEATED, None, None),
    ],
    "XStatMetadata": [
        ("id", 1, _INT64, _OPTIONAL, None, None),
        ("name", 2, _STRING, _OPTIONAL, None, None),
        ("description", 3, _STRING, _OPTIONAL, None, None),
    ],
}
#: the oneof of each message that has one
_ONEOFS = {"XEvent": "data", "XStat": "value"}
#: XPlane's two maps (int64 key -> message), as protobuf spells a map: a nested ``map_entry`` message
_MAP_ENTRIES = {"EventMetadataEntry": "XEventMetadata", "StatMetadataEntry": "XStatMetadata"}


def _file_descriptor(descriptor_pb2):  # noqa: ANN001, ANN202 - protobuf's module, imported lazily
    """The ``FileDescriptorProto`` of xplane.proto."""
    proto = descriptor_pb2.FileDescriptorProto(name="popprof_xplane.proto", package=PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        if name in _ONEOFS:
            message.oneof_decl.add(name=_ONEOFS[name])
        for field_name, number, kind, label, type_name, oneof in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".{PACKAGE}.{type_name}"
            if oneof is not None:
                field.oneof_index = oneof
        if name == "XPlane":
            for entry_name, value_type in _MAP_ENTRIES.items():
                entry = message.nested_type.add(name=entry_name)
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=_INT64, label=_OPTIONAL)
                entry.field.add(
                    name="value",
                    number=2,
                    type=_MESSAGE,
                    label=_OPTIONAL,
                    type_name=f".{PACKAGE}.{value_type}",
                )
    return proto


@cache
def xspace_class() -> type:
    """The ``XSpace`` message class (built once); raises ImportError when protobuf is not installed."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor(descriptor_pb2))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.XSpace"))


def parse(path: Path, data: bytes):  # noqa: ANN201 - an XSpace message
    """``data`` parsed as an XSpace; InputError (one line) without protobuf or for bytes that do not parse."""
    try:
        cls = xspace_class()
    except ImportError:
        raise InputError(path, "reading an XPlane profile needs the protobuf library", INSTALL_HINT) from None
    space = cls()
    try:
        space.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError (and RuntimeError of some builds) on damaged bytes
        raise InputError(
            path,
            f"not a readable XPlane protobuf ({type(exc).__name__}: {exc})",
            "the file may be truncated or corrupt; write the profile again",
        ) from None
    return space
