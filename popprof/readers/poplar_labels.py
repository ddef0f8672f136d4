"""The memory labels Poplar's text summary prints: its data types (in its order) and regions.

One list, read by the redaction's allow-list (these labels are public: every summary prints them)
and by the text-summary writer of ``popprof.testing`` (which prints them in this order). The pva /
SDK 1.x memory categories each data type stands for are in :data:`DATA_TYPE_OF_CATEGORY`.
"""

from __future__ import annotations

#: The data types of "Memory Usage", in the order Poplar prints them (reference facts, section 4).
DATA_TYPES: tuple[str, ...] = (
    "Variables",
    "Constants",
    "Host Exchange Packet Headers",
    "Global Exchange Packet Headers",
    "Stack",
    "Vertex Instances",
    "Copy Descriptors",
    "VectorList Descriptors",
    "Vertex Field Data",
    "Control Table",
    "Control Code",
    "Vertex Code",
    "Internal Exchange Code",
    "Host Exchange Code",
    "Global Exchange Code",
    "Instrumentation Results",
    "Shared Code Storage",
    "Shared Data Storage",
)

#: pva / SDK 1.x memory category -> the data-type label the text summary prints.
DATA_TYPE_OF_CATEGORY: dict[str, str] = {
    "variables": "Variables",
    "constant": "Constants",
    "constants": "Constants",
    "stack": "Stack",
    "vertexInstanceState": "Vertex Instances",
    "copyDescriptor": "Copy Descriptors",
    "vectorListDescriptor": "VectorList Descriptors",
    "vertexFieldData": "Vertex Field Data",
    "controlTable": "Control Table",
    "controlCode": "Control Code",
    "vertexCode": "Vertex Code",
    "internalExchangeCode": "Internal Exchange Code",
    "hostExchangeCode": "Host Exchange Code",
    "globalExchangeCode": "Global Exchange Code",
    "instrumentationResults": "Instrumentation Results",
    "sharedCodeStorage": "Shared Code Storage",
    "sharedDataStorage": "Shared Data Storage",
    "hostExchangePacketHeader": "Host Exchange Packet Headers",
    "globalExchangePacketHeader": "Global Exchange Packet Headers",
}

#: The memory regions, as printed.
REGIONS: tuple[str, ...] = ("Non-interleaved", "Interleaved", "Overflowed")
